"""Concurrency control: lock providers, the transaction (commit critical section),
heartbeats, and conflict resolution between writers. Free of any engine."""
