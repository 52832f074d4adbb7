"""How the plan drives the SDK's mocked runtime: deterministic, and cheap per resource.

The mocked engine's RPCs run inline on the event loop's thread, in submission order.

The SDK sends every registration and invoke through ``loop.run_in_executor(None, ...)``.
With the loop's default thread pool the mocked RPCs finished in thread-scheduling order, so
the order of registrations (the plan tree, ``--json``'s ``resources[]``, the manifests) and
which resource's outputs resolved first changed from run to run, and every RPC paid two
thread switches (costly on a loaded machine). :class:`InlineExecutor` runs each call at
once, inside ``submit``; its result reaches the loop through ``call_soon_threadsafe`` like
any executor's, in the order of submission, so the same program registers the same
resources in the same order every run.

The SDK's ``MockMonitor`` serialises its answers with ``_sync_await``, which on the loop's
own thread would pump the running loop from inside an RPC. :class:`InlineMockMonitor`
answers the same way without that: serialising plain values never suspends, so
:func:`run_sync` drives the coroutine to its end in one step.

:func:`without_source_positions`: each registration also walks the Python stack for the
engine's source positions (file URIs of every frame, a fifth of a plan's time), which no
mock reads; during a plan the SDK is handed the resource's declaration index instead, which
orders the plan's resources as the program declared them.

:func:`paused_gc`: the cyclic collector walked the SDK's few hundred thousand objects again
and again while a plan registered resources (more often the more resources); paused, a
plan's garbage (a few MB) is collected in one pass once the plan is done. The CLI's short
commands go further and run without it (``raytpu.cli.app.main``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import itertools
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs
from pulumi.runtime.proto import provider_pb2, resource_pb2, source_pb2

STACK_TYPE = "pulumi:pulumi:Stack"


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """A default executor that runs each call inside ``submit`` (no thread is started)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
               ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # handed to the awaiting task, as a pool does
            future.set_exception(e)
        return future


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """The value of a coroutine that completes without suspending (else RuntimeError)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a mocked RPC awaited something: it cannot run inline")


class InlineMockMonitor(MockMonitor):
    """``MockMonitor``'s registrations and invokes, answered without pumping the loop."""

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == STACK_TYPE:
            return resource_pb2.RegisterResourceResponse(urn=urn)
        args = MockResourceArgs(
            typ=request.type, name=request.name,
            inputs=rpc.deserialize_properties(request.object), provider=request.provider,
            resource_id=request.importId, custom=request.custom or False,
        )
        found, state = self.mocks.new_resource(args)
        id_ = found or ""  # what the wire makes of None
        # A provider planning a create returns its inputs: a mock that answers with the
        # inputs object itself gets the request's own properties sent back, not serialised
        # again (a fifth of what the monitor spent per resource).
        obj = (request.object if state is args.inputs
               else run_sync(rpc.serialize_properties(state, {})))
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, id_, state)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=obj)

    def ReadResource(self, request: Any) -> Any:
        args = MockResourceArgs(
            typ=request.type, name=request.name,
            inputs=rpc.deserialize_properties(request.properties), provider=request.provider,
            resource_id=request.id,
        )
        found, state = self.mocks.new_resource(args)
        id_ = found or ""
        urn = self.make_urn(request.parent, request.type, request.name)
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, id_, state)
        return resource_pb2.ReadResourceResponse(
            urn=urn, properties=run_sync(rpc.serialize_properties(state, {})))

    def Invoke(self, request: Any) -> Any:
        args = rpc.deserialize_properties(request.args)
        if request.tok == "pulumi:pulumi:getResource":
            registered = self.resources.get(args["urn"])
            if registered is None:
                raise Exception(f"unknown resource {args['urn']}")
            ret = run_sync(rpc.serialize_properties(registered._asdict(), {}))
            return resource_pb2.ResourceInvokeResponse(failures=None, **{"return": ret})
        answer = self.mocks.call(MockCallArgs(token=request.tok, args=args,
                                              provider=request.provider))
        ret_value, failures = (answer, []) if isinstance(answer, dict) else answer
        checks = [provider_pb2.CheckFailure(property=p, reason=r) for p, r in failures or []]
        ret = run_sync(rpc.serialize_properties(ret_value, {}))
        return resource_pb2.ResourceInvokeResponse(failures=checks or None, **{"return": ret})


DECLARED_AT = "raytpu:declaration-order"
"""The ``uri`` of the one frame :func:`without_source_positions` hands each registration."""


@contextlib.contextmanager
def without_source_positions() -> Iterator[None]:
    """Registrations inside carry, instead of a stack trace, one frame whose ``line`` is the
    resource's place in declaration order (:func:`declaration_index`).

    The SDK takes the trace synchronously in the resource's constructor, while the RPC waits
    for the inputs' outputs: a resource whose inputs resolve late (an address Memorystore
    computes) registers after later siblings, by a number of loop turns that varies with set
    iteration order from run to run. The index keeps the plan in the program's order."""
    walk = getattr(sdk_resource, "_get_stack_trace", None)
    if walk is None:  # an SDK without it: nothing to skip
        yield
        return
    count = itertools.count()

    def declared() -> source_pb2.StackTrace:
        frame = source_pb2.StackFrame(pc=source_pb2.SourcePosition(uri=DECLARED_AT,
                                                                   line=next(count)))
        return source_pb2.StackTrace(frames=[frame])

    sdk_resource._get_stack_trace = declared
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = walk


def declaration_index(request: Any) -> int | None:
    """The index :func:`without_source_positions` gave a registration request, if any."""
    frames = request.stackTrace.frames
    if frames and frames[0].pc.uri == DECLARED_AT:
        return int(frames[0].pc.line)
    return None


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside (reference counting still frees most objects)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def inline_rpcs(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """``loop``'s default executor is an :class:`InlineExecutor` inside, and whatever it was
    before afterwards (other code on the loop keeps the thread pool it had)."""
    previous = getattr(loop, "_default_executor", None)  # CPython's BaseEventLoop
    loop.set_default_executor(InlineExecutor())
    try:
        yield
    finally:
        loop._default_executor = previous  # type: ignore[attr-defined]
