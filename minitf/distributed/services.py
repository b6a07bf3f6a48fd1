"""The gRPC side of protocol.proto's two services, built from its descriptors.

Book section: "The Master and Worker Services".  Each method is described once, in
``protocol.proto``: its request and response messages and whether each side streams.  This
module turns that description into gRPC handlers for a servicer object (``Master``,
``Worker``: one Python method per RPC, named as in the .proto) and into callables on a
channel (``Stub(channel, "WorkerService").RunGraph(...)``), so no generated gRPC module is
needed.

The methods that stream tensors (:data:`RAW_REQUESTS`, :data:`RAW_RESPONSES`) take their
requests and give their responses as serialized bytes: ``wire`` writes and reads the tensor
pieces in them by hand (one copy of the data per side), and a master forwards its workers'
responses to the client without parsing them.  Everything a server sends goes through
:func:`wire.serialize`, so a handler may yield messages or bytes.
"""

import functools

import grpc

from minitf.distributed import protocol_pb2 as pb  # noqa: E402
from minitf.distributed import streams, wire  # noqa: E402
from minitf.framework import errors

#: What a server's request parser gives for bytes that are no message of its type.
MALFORMED = object()

PACKAGE = pb.DESCRIPTOR.package
#: Methods whose requests reach the server as bytes ...
RAW_REQUESTS = frozenset({"RunStep", "RunSteps", "RunGraph", "RunGraphs", "RecvTensorsSteps"})
#: ... and whose responses reach the client as bytes (method names are unique across services).
RAW_RESPONSES = RAW_REQUESTS | {"RecvTensor", "RecvTensors"}
_KINDS = {
    (False, False): "unary_unary",
    (False, True): "unary_stream",
    (True, False): "stream_unary",
    (True, True): "stream_stream",
}
#: The service of each method ("RunSteps": "MasterService" ...).
SERVICE_OF = {m.name: s.name for s in pb.DESCRIPTOR.services_by_name.values() for m in s.methods}
assert len(SERVICE_OF) == sum(len(s.methods) for s in pb.DESCRIPTOR.services_by_name.values())


def methods(service):
    """``(name, kind, request parser, response parser)`` per method; a parser is None where
    the message travels as bytes."""
    out = []
    for m in pb.DESCRIPTOR.services_by_name[service].methods:
        parsers = [
            None if m.name in raw else getattr(pb, t.name).FromString
            for t, raw in ((m.input_type, RAW_REQUESTS), (m.output_type, RAW_RESPONSES))
        ]
        out.append((m.name, _KINDS[m.client_streaming, m.server_streaming], *parsers))
    return out


def add_to_server(server, service, servicer, pools=None):
    """Registers every method of ``service`` with ``servicer``'s method of the same name; a
    method named in ``pools`` (``{method: ThreadPoolExecutor}``) runs on that pool's threads
    rather than the server's own."""
    handlers = {}
    for name, kind, parse_request, _ in methods(service):
        make = getattr(grpc, kind + "_rpc_method_handler")
        behavior = getattr(servicer, name)
        if parse_request is not None:
            behavior, parse_request = _rejecting_malformed(behavior, kind, name, parse_request)
        if pools and name in pools:
            behavior = functools.partial(behavior)  # (a bound method takes no attribute)
            behavior.experimental_thread_pool = pools[name]  # read by grpc's server
        handlers[name] = make(
            behavior,
            request_deserializer=parse_request,
            response_serializer=wire.serialize,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("%s.%s" % (PACKAGE, service), handlers),)
    )


def _rejecting_malformed(method, kind, name, parse):
    """``(handler, parser)``: bytes that do not parse reach ``method`` as an
    InvalidArgumentError (raised by its request iterator, or the call's status), never as an
    exception inside gRPC, which logs it with its traceback on every bad request."""

    def tolerant_parse(data):
        try:
            return parse(data)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError
            return MALFORMED

    def malformed():
        return errors.InvalidArgumentError(None, None, "Malformed %s request." % name)

    if kind.startswith("stream"):

        def checked(requests):
            for r in requests:
                if r is MALFORMED:
                    raise malformed()
                yield r

        return (lambda requests, context: method(checked(requests), context)), tolerant_parse

    def handler(request, context):
        if request is MALFORMED:
            context.abort(*wire.status_from_error(malformed()))
        return method(request, context)

    return handler, tolerant_parse


class Stub:
    """One callable per method of ``service`` on ``channel``; a call on a channel that another
    call closed meanwhile raises :class:`streams.ChannelClosed` (an RpcError, as every failed
    call's), not gRPC's ValueError."""

    def __init__(self, channel, service):
        for name, kind, _, parse_response in methods(service):
            method = getattr(channel, kind)(
                "/%s.%s/%s" % (PACKAGE, service, name),
                request_serializer=wire.serialize,
                response_deserializer=parse_response,
                _registered_method=True,
            )
            setattr(self, name, _on_open_channel(method))


def _on_open_channel(method):
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except ValueError as e:  # "Cannot invoke RPC on closed channel!" (or ": Channel closed!")
            if "Cannot invoke RPC" not in str(e):
                raise
            raise streams.ChannelClosed() from None

    return call
