"""Build hook for the optional C extensions; everything else is in pyproject.toml.

``quasar.storage.file._syncio`` lets the group-commit writer write and fdatasync a
whole group with the GIL released once; ``quasar.protocol._batchsplit`` splits batches
of plain records for consumers (see the C files for why). Both are optional: if they
cannot be compiled, the install still succeeds and the Python code paths are used.
"""

from setuptools import Extension, setup

COMPILE_ARGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(
    ext_modules=[
        Extension(
            "quasar.storage.file._syncio",
            ["src/quasar/storage/file/_syncio.c"],
            optional=True,
            extra_compile_args=COMPILE_ARGS,
        ),
        Extension(
            "quasar.protocol._batchsplit",
            ["src/quasar/protocol/_batchsplit.c"],
            optional=True,
            extra_compile_args=COMPILE_ARGS,
        ),
    ]
)
