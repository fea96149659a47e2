"""Build hook for the one optional C extension; everything else is in pyproject.toml.

``quasar.storage.file._syncio`` lets the group-commit writer write and fdatasync a
whole group with the GIL released once (see the C file for why). It is optional: if
it cannot be compiled, the install still succeeds and the writer uses ``os`` calls.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "quasar.storage.file._syncio",
            ["src/quasar/storage/file/_syncio.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
