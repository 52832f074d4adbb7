"""The spec layer: what a stack's components and a training job *are*, as plain typed values.

Everything above reads these types (the stack configuration parses into them, the Pulumi
components take them as Args, the plan and the CLI print them, the trainer runs them), and
nothing here imports Pulumi, torch or Ray at module level (``tests/test_import_graph.py``
checks it), so loading a stack's configuration or a job's options costs milliseconds.

* Job spec: :mod:`.training` (the trainer's config and launch options), :mod:`.presets`,
  :mod:`.train_options` (flags -> config), :mod:`.scaling` (how a run asks Ray for its
  slices), :mod:`.flops` and :mod:`.memory_fit` (does a model fit a slice's HBM),
  :mod:`.ray_auth` (Ray token auth from a client's side).
* Component Args: :mod:`.inputs` (the deferred-value types Args fields take) and one module
  per component family.
"""
