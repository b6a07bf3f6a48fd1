import sys, time, threading
sys.path.insert(0, "/work/main")
from minitf.distributed import protocol_pb2 as pb, wire, streams
from minitf.distributed.worker import Channels
ch = Channels(single_threaded_streams=True)
stub = ch.worker("127.0.0.1:50651")
# make the watchdog tick as in a server in the middle of a step
class C: pass
c = C(); streams.watchdog.watch(c, time.monotonic() + 1000)
res = []
for i in range(1, 9):
    t0 = time.perf_counter()
    v = wire.assemble_chunks(stub.RecvTensor(pb.RecvTensorRequest(step_id=i, rendezvous_key="k"), timeout=30))
    res.append(time.perf_counter() - t0)
print("with watchdog", ["%.0f" % (x*1e3) for x in res])
