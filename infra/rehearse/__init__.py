"""``raytpu rehearse``: a stack's Kubernetes objects on a real, local control plane.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK (fake nodes mirroring the
stack's pools) and the KubeRay operator, each built from its Go module at the version pinned
in :mod:`raytpu.facts.versions` into a cache outside the repository (:mod:`.build`), run on
loopback; the stack's objects are applied server-side as the program declares them and what
the API server, the operator and the scheduler made of them is reported.
"""
