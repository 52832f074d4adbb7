"""``python -m raytpu``: the command line (same as the ``raytpu`` script).

The Pulumi program's entry point is ``deploy/__main__.py`` (Pulumi.yaml ``main``).
"""

from raytpu.cli.app import main

main()
