"""Pulumi entry point (Pulumi.yaml: ``main: infra/``). The program lives in raytpu.program."""

from raytpu.program import main

main()
