"""Per-request CPU of the rig's send() + record path, in whichever tree is first on PYTHONPATH."""
import sys, time, json
from gevent import monkey; monkey.patch_all()
import gevent, gevent.server
import inspect
from loadtest.client import transport
from loadtest.client.protocols.openai import parse_line
try:
    from loadtest.workload.spec import RequestSpec
except ImportError:
    from loadtest.client.workload import RequestSpec
from loadtest.results.record import RequestRecord

TOK = 128
def chunk(b):
    return b"%x\r\n%s\r\n" % (len(b), b)
line = b'data: {"id":"cmpl-cdf775781fde0405","object":"text_completion","created":1795697689,"model":"pacer","choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
last = line.replace(b'"finish_reason":null', b'"finish_reason":"length"')
usage = b'data: {"id":"x","object":"text_completion","created":1,"model":"pacer","choices":[],"usage":{"prompt_tokens":1,"total_tokens":129,"completion_tokens":128}}\n\n'
body = b"".join(chunk(l) for l in [line] * (TOK - 1) + [last, usage, b"data: [DONE]\n\n"]) + b"0\r\n\r\n"
head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nserver: pacer\r\n\r\n"
answer = head + body
pieces = [chunk(l) for l in [line] * (TOK - 1) + [last, usage, b"data: [DONE]\n\n"]] + [b"0\r\n\r\n"]
TRICKLE = len(sys.argv) > 2

def handle(sock, addr):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            d = sock.recv(65536)
            if not d: return
            buf += d
        h, _, buf = buf.partition(b"\r\n\r\n")
        n = int([l for l in h.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
        while len(buf) < n:
            buf += sock.recv(65536)
        buf = buf[n:]
        if TRICKLE:
            sock.sendall(head)
            for piece in pieces:
                gevent.sleep(0.0002)
                sock.sendall(piece)
        else:
            sock.sendall(answer)

server = gevent.server.StreamServer(("127.0.0.1", 0), handle); server.start()
url = f"http://127.0.0.1:{server.server_port}"
client = transport.new_client(url, read_timeout_s=600)
transport.open_connection(client)
spec = RequestSpec(1, "p1", "/v1/completions", json.dumps({"model": "pacer", "prompt": "hello there", "max_tokens": 128, "stream": True, "stream_options": {"include_usage": True}, "temperature": 0.0, "ignore_eos": True}).encode())
kw = {}
if "bounds" in inspect.signature(transport.send).parameters:
    from loadtest.client.bounds import Bounds
    kw["bounds"] = Bounds()
N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
def one():
    r = transport.send(client, spec, parse_line, "usage", {"Content-Type": "application/json"}, **kw)
    assert r.ok and r.output_chunks == TOK, (r.error, r.output_chunks)
    json.dumps(r.to_json())
    return r
for _ in range(50 if TRICKLE else 200): one()
best = []
for rep in range(3 if TRICKLE else 5):
    t = time.process_time()
    for _ in range(N): one()
    best.append((time.process_time() - t) / N * 1e6)
# the parse alone, per line
t = time.process_time()
for _ in range(200000): parse_line(line)
pl = (time.process_time() - t) / 200000 * 1e6
r = one()
t = time.process_time()
for _ in range(20000): json.dumps(r.to_json())
tj = (time.process_time() - t) / 20000 * 1e6
print(f"{sys.path[0] if False else __import__('loadtest').__file__}: send+record per request (client+server) min {min(best):.0f} us, median {sorted(best)[len(best)//2]:.0f} us; parse_line {pl:.2f} us/line; to_json+dumps {tj:.1f} us")
