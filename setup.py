"""The one compiled part of tidemark: Hadoop's Murmur hashing for Hudi's bloom filter.

Everything else is in pyproject.toml. The extension is optional: without a C compiler the
install goes on, and tidemark hashes with numpy (slower; the same filters, byte for byte).
"""

import sys

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tidemark.format._murmur",
            sources=["src/tidemark/format/_murmur.c"],
            extra_compile_args=[] if sys.platform == "win32" else ["-O3"],
            optional=True,
        )
    ]
)
