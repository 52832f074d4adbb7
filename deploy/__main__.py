"""Pulumi entry point (Pulumi.yaml ``main: deploy/``); the program lives in raytpu.program.stack.

Kept out of the package so that ``python -m raytpu`` is the CLI and never a stack program.
``pulumi install`` / the first ``pulumi up`` create ``.venv`` and install this folder's
requirements.txt (the repository itself, editable) into it.
"""

from raytpu.program.stack import main

main()
