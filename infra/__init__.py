"""raytpu: Ray on Cloud TPU multi-host slices on GKE, as Pulumi components.

Import map (the repository folders on the left):

* ``infra/``      -> ``raytpu``            catalog, versions, stack config, program, CLI
* ``components/`` -> ``raytpu.components`` the Pulumi ComponentResources
* ``workloads/``  -> ``raytpu.workloads``  the torch_xla trainer and its Ray launcher
"""

__version__ = "0.1.0"
