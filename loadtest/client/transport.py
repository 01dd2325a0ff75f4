"""send(client, spec) -> RequestRecord: one streaming request, every chunk stamped on arrival.

This is the hand-written hot path. It reads the body line by line as bytes arrive
(geventhttpclient's `readline(b"\\n")` returns as soon as a line is complete; no block
buffering) and stamps each line with `perf_counter_ns()` before parsing it.

It retries in one case only: the server closed the kept-alive connection before answering a
single byte (uvicorn closes a connection whose request it has not read within its keep-alive
timeout; llama.cpp's server resets some connections of a burst). The request is sent once more
on a fresh connection, its times still count from the first send, and `reconnects` says so.

A 429 (rate limited) is no engine failure: the request waits as long as the answer's Retry-After
says (a default back-off where it says nothing), is sent again, and its times count from the
send that was let through; `rate_limited` and `rate_limited_wait_ns` say how often and how long.
A request still refused after RATE_LIMIT_TRIES sends or RATE_LIMIT_WAIT_S of waiting fails as
`rate_limited`.

An engine is input too: every request is held to the bounds of loadtest/client/bounds.py (a
deadline from send to last byte, an output length far past max_tokens, a line length), cut and
closed when it passes one, and what the engine sent wrongly but harmlessly (a Content-Type other
than text/event-stream, a second `[DONE]`, a count the dialect ignored) is kept in the record's
`engine_flaws`. Lines are read with the rig's own readline (`_line_reader`): geventhttpclient's
has no length limit and searches its whole buffer again after every read, so one line of many
megabytes took minutes.

Both time bounds of a request, its deadline and the read timeout (no byte for --read-timeout:
`timeout`), are kept by one timer per send (`_Watch`), not by gevent's socket timeouts: those
make and drop a timer for every read that waits, once per streamed token, which at 256 users
was a measurable share of the client's time (docs/measurer.md). Each read only stamps the time.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from time import perf_counter_ns

import gevent

from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from loadtest.client.bounds import OUTPUT_MARGIN, OUTPUT_SLACK, Bounds
from loadtest.client.protocols import ProtocolError, StreamEvent
from loadtest.results.record import RequestRecord
from loadtest.workload.spec import RequestSpec

__all__ = ["new_client", "open_connection", "send"]

_ERROR_BODY_BYTES = 2000
RATE_LIMIT_TRIES = 8
RATE_LIMIT_WAIT_S = 300.0  # waiting in all, per request
_DEFAULT_BACKOFF_S = 1.0  # doubled per refusal that names no Retry-After
_STREAM_TYPE = "text/event-stream"
_FLAWS_KEPT = 4  # per request: an engine that gets one field wrong in every chunk says so once
_OUTSIDE_A_RUN = Bounds()


class _DeadlinePassed(Exception):
    """The request's deadline passed: raised by its timer, or seen as a line arrived."""


class _Client(HTTPClient):
    """geventhttpclient's client, its sockets without a timeout of their own: `send` keeps the
    read timeout (`read_timeout_s`) with its one timer per request."""

    read_timeout_s: float | None = None


def new_client(url: str, *, read_timeout_s: float, connect_timeout_s: float = 10.0) -> HTTPClient:
    """One keep-alive connection (one user = one stream at a time); proxies are never used."""
    client = _Client.from_url(url, concurrency=1, connection_timeout=connect_timeout_s,
                              network_timeout=None)
    client.read_timeout_s = read_timeout_s
    return client


class _Watch:
    """One request's time bounds on one gevent timer: its deadline from the send
    (_DeadlinePassed) and its read timeout, the longest silence (socket.timeout: no byte for
    read_timeout_s, counted from the send or the last read). A read only moves `last_ns`; the
    timer is set once per send, wakes when a bound may have passed, and sets itself again for
    the silence still allowed when bytes came since."""

    __slots__ = ("last_ns", "_deadline_ns", "_deadline_s", "_silence_ns", "_greenlet", "_timer")

    def __init__(self, deadline_s: float, read_timeout_s: float | None) -> None:
        self._deadline_s = deadline_s
        self._silence_ns = None if read_timeout_s is None else int(read_timeout_s * 1e9)
        self._greenlet = gevent.getcurrent()
        self._timer = None
        self.last_ns = self._deadline_ns = 0

    @property
    def deadline_ns(self) -> int:
        return self._deadline_ns

    def arm(self, sent_ns: int) -> None:
        """Start both bounds at a send."""
        self.stop()
        self.last_ns = sent_ns
        self._deadline_ns = sent_ns + int(self._deadline_s * 1e9)
        self._set(perf_counter_ns())

    def _set(self, now_ns: int) -> None:
        due_ns = self._deadline_ns
        if self._silence_ns is not None:
            due_ns = min(due_ns, self.last_ns + self._silence_ns)
        self._timer = gevent.get_hub().loop.timer(max(due_ns - now_ns, 0) / 1e9)
        self._timer.start(self._wake)

    def _wake(self) -> None:
        self.stop()
        now_ns = perf_counter_ns()
        if now_ns >= self._deadline_ns:
            self._greenlet.throw(_DeadlinePassed)
        elif self._silence_ns is not None and now_ns - self.last_ns >= self._silence_ns:
            self._greenlet.throw(socket.timeout("timed out"))
        else:
            self._set(now_ns)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.close()
            self._timer = None


def open_connection(client: HTTPClient) -> None:
    """Open the client's keep-alive connection now, before the run, so that no measured request
    pays for the name lookup and TCP handshake. Measured on 2 cores with 128 users: connecting
    inside the first request (gevent's threaded resolver, while earlier users already sent)
    spread the first wave's arrival at the engine over ~800 ms instead of ~100 ms, which moved
    the engine's batching and so TTFT. A failure is left for the first request to record."""
    pool = client._connection_pool  # private (geventhttpclient is pinned): there is no public connect
    try:
        pool.return_socket(pool.get_socket())
    except OSError:
        pass


def send(client: HTTPClient, spec: RequestSpec, parse_line: Callable[[bytes], StreamEvent | None],
         tokens_source: str, headers: Mapping[str, str], worker: int = 0,
         keep_text: bool = False, bounds: Bounds = _OUTSIDE_A_RUN) -> RequestRecord:
    """Send one request and read its stream to the end, or to a bound. Failures become the
    record's error; after a failed record the caller must not reuse `client` (its connection
    state is unknown)."""
    deadline_s, output_limit = bounds.for_request(spec.body)
    watch = _Watch(deadline_s, getattr(client, "read_timeout_s", None))
    record = RequestRecord(spec.request_id, spec.prompt_id, time.time(), perf_counter_ns(),
                           worker=worker)
    try:
        watch.arm(record.sent_ns)
        try:
            response = _post_past_rate_limits(client, spec, headers, record, watch)
        except _DeadlinePassed:
            record.done_ns = perf_counter_ns()
            return record.fail("deadline", _past_deadline(deadline_s))
        except Exception as exc:  # noqa: BLE001 - every failure is recorded, none is raised
            record.done_ns = perf_counter_ns()
            return record.fail(_failure_kind(exc, before_response=True), _describe(exc))
        record.http_status = response.status_code
        _read_answer(response, record, parse_line, tokens_source, keep_text,
                     _line_reader(response, bounds.max_line_bytes, watch), output_limit,
                     watch.deadline_ns)
    finally:
        watch.stop()
    if record.done_ns is None:
        record.done_ns = perf_counter_ns()
    if record.ok and record.output_tokens is None:
        record.output_tokens, record.output_tokens_source = record.output_chunks, "chunks"
    return record


def _read_answer(response, record: RequestRecord,
                 parse_line: Callable[[bytes], StreamEvent | None], tokens_source: str,
                 keep_text: bool, readline: Callable[[], bytes], output_limit: int | None,
                 deadline_ns: int) -> None:
    """The answer to its end into `record`: an error status's body, or the stream."""
    if response.status_code == 429:
        text = _read_error_body(response)
        record.done_ns = perf_counter_ns()
        record.fail("rate_limited", f"HTTP 429 after {record.rate_limited} tries: {text}")
        return
    if response.status_code >= 400:
        text = _read_error_body(response)
        record.done_ns = perf_counter_ns()
        record.fail("http_status", f"HTTP {response.status_code}: {text}")
        return
    content_type = response.get("Content-Type") or ""
    if content_type.split(";")[0].strip().lower() != _STREAM_TYPE:
        _flaw(record, f"Content-Type {content_type[:60]!r}, not {_STREAM_TYPE}")
    try:
        finished = _read_stream(response, record, parse_line, tokens_source, keep_text,
                                readline, output_limit, deadline_ns)
    except _DeadlinePassed:
        record.done_ns = perf_counter_ns()
        record.fail("deadline", _past_deadline((deadline_ns - record.sent_ns) / 1e9))
        response.release()  # mid-stream: closes the connection
    except ProtocolError as exc:
        record.fail("stream_protocol", str(exc) + _not_a_stream(record, content_type))
    except Exception as exc:  # noqa: BLE001
        record.fail(_failure_kind(exc, before_response=False), _describe(exc))
    else:
        if not finished and record.ok:
            record.fail("truncated", "stream ended before the engine finished it")
        response.release()


def _past_deadline(deadline_s: float) -> str:
    return f"unfinished at its deadline, {deadline_s:g} s after its send: cut"


def _not_a_stream(record: RequestRecord, content_type: str) -> str:
    """Said after a protocol error on an answer that never claimed to be a stream."""
    if any(flaw.startswith("Content-Type") for flaw in record.engine_flaws):
        return f" (the answer's Content-Type is {content_type[:60]!r}, not {_STREAM_TYPE})"
    return ""


def _flaw(record: RequestRecord, text: str) -> None:
    if len(record.engine_flaws) < _FLAWS_KEPT and text not in record.engine_flaws:
        record.engine_flaws.append(text)


def _post_past_rate_limits(client: HTTPClient, spec: RequestSpec, headers: Mapping[str, str],
                           record: RequestRecord, watch: _Watch):
    """The answer to the first send the endpoint lets through (or its last 429). Each send
    has its own deadline (a server that trickles its headers is cut too): `watch` is set
    again at each."""
    first_sent_ns = record.sent_ns
    while True:
        response = _post(client, spec, headers, record)
        if response.status_code != 429:
            return response
        record.rate_limited += 1
        waited_s = (perf_counter_ns() - first_sent_ns) / 1e9
        delay_s = _retry_after_s(response.get("Retry-After"), record.rate_limited)
        if record.rate_limited >= RATE_LIMIT_TRIES or waited_s + delay_s > RATE_LIMIT_WAIT_S:
            return response
        _read_error_body(response)  # the connection is reused: read the refusal to its end
        watch.stop()  # the wait is no send's
        gevent.sleep(delay_s)
        record.sent_at, record.sent_ns = time.time(), perf_counter_ns()
        record.rate_limited_wait_ns = record.sent_ns - first_sent_ns
        watch.arm(record.sent_ns)


def _retry_after_s(value: str | None, refusals: int) -> float:
    """Retry-After as seconds or an HTTP date (RFC 9110); a doubling back-off without one."""
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    return _DEFAULT_BACKOFF_S * 2 ** (refusals - 1)


def _post(client: HTTPClient, spec: RequestSpec, headers: Mapping[str, str],
          record: RequestRecord):
    try:
        return client.request("POST", spec.path, body=spec.body, headers=headers)
    except (HTTPConnectionClosed, ConnectionResetError, BrokenPipeError):
        pass  # closed before a byte of the answer: the pool opens a fresh connection below
    record.reconnects += 1
    return client.request("POST", spec.path, body=spec.body, headers=headers)


def _read_stream(response, record: RequestRecord,
                 parse_line: Callable[[bytes], StreamEvent | None], tokens_source: str,
                 keep_text: bool, readline: Callable[[], bytes], output_limit: int | None,
                 deadline_ns: int) -> bool:
    """Read lines into `record` until the stream ends; True when the engine said it finished.
    Raises _DeadlinePassed, ProtocolError, or a socket error; cuts (a failed record, the
    connection closed) a stream past `output_limit` output chunks."""
    gaps = record.chunk_gaps_ns
    last_ns = 0
    finished = False
    ends = 0  # end markers seen ([DONE])
    while True:
        line = readline()
        now = perf_counter_ns()
        if not line:
            record.done_ns = now
            return finished
        if now > deadline_ns:
            raise _DeadlinePassed
        if line == b"\n":  # the blank line after each SSE event: nothing to parse
            continue
        event = parse_line(line)
        if event is None:
            continue
        if event.error is not None:
            record.done_ns = now
            record.fail("stream_error", event.error)
            return True
        if event.flaw is not None:
            _flaw(record, event.flaw)
        if event.output:
            if ends:
                raise ProtocolError(f"output after [DONE]: {line[:80]!r}")
            if record.first_chunk_ns is None:
                record.first_chunk_ns = now
            else:
                gaps.append(now - last_ns)
            last_ns = now
            record.output_chunks += 1
            if (event.reasoning is not None or event.tool_calls is not None
                    or record.reasoning_chunks):
                _more_than_text(record, event, now, keep_text)
            if output_limit is not None and record.output_chunks > output_limit:
                record.done_ns = now
                record.fail("over_max_tokens", f"{record.output_chunks} output chunks, past "
                            f"{output_limit} ({OUTPUT_MARGIN} x max_tokens + {OUTPUT_SLACK}): cut")
                response.release()  # mid-stream: closes the connection
                return True
        if event.finish_reason is not None:
            record.finish_reason = event.finish_reason
        if event.output_tokens is not None:
            if output_limit is not None and event.output_tokens > output_limit:
                _flaw(record, f"reported {event.output_tokens} output tokens, past {output_limit}")
            else:
                record.output_tokens = event.output_tokens
                record.output_tokens_source = tokens_source
            if event.reasoning_tokens is not None:
                record.reasoning_tokens = event.reasoning_tokens
        if event.prompt_tokens is not None:
            record.prompt_tokens = event.prompt_tokens
        if event.token_ids is not None:  # --recount, --keep-outputs (vLLM family)
            if record.output_ids is None:
                record.output_ids, record.output_text = [], []
            record.output_ids.extend(event.token_ids)
            record.output_text.append(event.text or "")
        elif keep_text and event.text:  # --keep-outputs, engines that stream no ids: text only
            if record.output_text is None:
                record.output_text = []
            record.output_text.append(event.text)
        if event.end_marker:
            ends += 1
            if ends == 2:
                _flaw(record, "a second [DONE]")
        if event.finished:
            finished = True


def _more_than_text(record: RequestRecord, event: StreamEvent, now: int, keep_text: bool) -> None:
    """An output chunk that is not plain answer text: a reasoning stream's stamps (its first and
    last reasoning chunks, its first answer chunk after reasoning, loadtest/results/reasoning.py;
    a chunk may carry both at the switch) and tool-call fragments, kept for the answer's check."""
    if event.reasoning is not None:
        if record.first_reasoning_ns is None:
            record.first_reasoning_ns = now
        record.last_reasoning_ns = now
        record.reasoning_chunks += 1
        if (event.text or event.tool_calls) and record.first_answer_ns is None:
            record.first_answer_ns = now
    elif record.reasoning_chunks and record.first_answer_ns is None:
        record.first_answer_ns = now
    if event.tool_calls is not None and keep_text:
        if record.tool_calls is None:
            record.tool_calls = []
        record.tool_calls.extend(event.tool_calls)


def _line_reader(response, max_bytes: int, watch: _Watch) -> Callable[[], bytes]:
    """readline() for the response's body: the next line with its b"\n", the unterminated
    rest at the end, b"" once the body is done. A line over `max_bytes` is a ProtocolError as
    soon as that many bytes hold no line end. Each read only searches the bytes it added, and
    stamps `watch.last_ns` (the read timeout counts from it).
    Uses the response's buffer and socket (private: geventhttpclient is pinned)."""
    buffer = response._body_buffer

    def readline() -> bytes:
        searched = 0
        while True:
            end = buffer.find(b"\n", searched)
            if end >= 0:
                if end >= max_bytes:
                    break
                line = bytes(buffer[:end + 1])
                del buffer[:end + 1]
                return line
            if len(buffer) > max_bytes:
                break
            searched = len(buffer)
            if response.message_complete:
                line = bytes(buffer)
                del buffer[:]
                return line
            sock = response._sock
            if sock is None:
                raise HTTPConnectionClosed("connection closed.")
            try:
                data = sock.recv(response.block_size)
                watch.last_ns = perf_counter_ns()
                response.feed(data)
            except BaseException:
                response.release()
                raise
        response.release()
        raise ProtocolError(f"a line of over {max_bytes} bytes: {bytes(buffer[:80])!r}")

    return readline


def _read_error_body(response) -> str:
    try:
        return response.read(_ERROR_BODY_BYTES).decode("utf-8", "replace").strip()
    except Exception as exc:  # noqa: BLE001
        return f"(body unreadable: {_describe(exc)})"


def _failure_kind(exc: BaseException, *, before_response: bool) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout"
    if _not_http(exc):
        return "stream_protocol"
    if before_response and isinstance(exc, (ConnectionRefusedError, socket.gaierror)):
        return "connect"
    if before_response and isinstance(exc, OSError) and not isinstance(exc, ConnectionResetError):
        return "connect"
    return "truncated"


def _not_http(exc: BaseException) -> bool:
    """The answer broke HTTP itself: a status line, headers or chunked encoding that llhttp
    cannot parse (its errors carry llhttp's error code: ('Invalid character in chunk size', 12)).
    A connection that closed early raises HTTPParseError too ("connection closed ...",
    "Incomplete response."): that is `truncated`, as from an engine that dies."""
    return (isinstance(exc, HTTPParseError) and len(exc.args) == 2
            and isinstance(exc.args[1], int))


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"not valid HTTP: {text}" if _not_http(exc) else text
