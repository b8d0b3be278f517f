# SPDX-License-Identifier: Apache-2.0
"""The send schedule of the test bed's UDP senders, standard library only.

Shared by tests/udp-send.py (IPv4, for ovs-integration.sh and the other
OVS tests) and tests/overlay-send.py (IPv4 and IPv6, for ovs-overlay.sh).
Each script imports it from its own folder (Python puts a script's folder
first on sys.path).

send_flows(flows, socks, t0, stop) sends each flow from its socket
socks[i], one datagram every flow["gap_ns"] nanoseconds from
t0 + flow["start_ns"] (wall-clock nanoseconds), flow["count"] datagrams
(0: until 'stop' is not empty; a signal handler appends to it).
Datagram k of a flow carries flow["size"](k) bytes of 0x5a to
(flow["dst"], flow["dport"]).  Datagrams due at the same time go out
round-robin over the flows.  It counts in each flow: "packets" and
"payload" sent successfully, "errors" (failed sends), "t_first" and
"t_last" (wall-clock nanoseconds just before the first and just after the
last successful send, None before one), and returns the overall
(t_first, t_last).

wait_until(t_ns) sleeps until wall-clock time t_ns, busy-waiting the last
300 us so that a datagram leaves on time.
"""
import heapq
import time

PAYLOAD = b"\x5a" * 65507


def wait_until(t_ns):
    while True:
        left = t_ns - time.time_ns()
        if left <= 0:
            return
        if left > 300000:
            time.sleep((left - 250000) / 1e9)


def send_flows(flows, socks, t0, stop=()):
    # Schedule: (due time, sequence number in its flow, flow index).
    heap = [(t0 + f["start_ns"], 0, i) for i, f in enumerate(flows)]
    heapq.heapify(heap)
    t_first = t_last = None
    while heap and not stop:
        due, k, i = heapq.heappop(heap)
        f = flows[i]
        wait_until(due)
        size = f["size"](k)
        t_before = time.time_ns()
        try:
            socks[i].sendto(PAYLOAD[:size], (f["dst"], f["dport"]))
        except OSError:
            f["errors"] += 1
        else:
            t_after = time.time_ns()
            f["packets"] += 1
            f["payload"] += size
            if f["t_first"] is None:
                f["t_first"] = t_before
            f["t_last"] = t_after
            if t_first is None:
                t_first = t_before
            t_last = t_after
        if f["count"] == 0 or k + 1 < f["count"]:
            heapq.heappush(heap, (t0 + f["start_ns"] + (k + 1) * f["gap_ns"],
                                  k + 1, i))
    return t_first, t_last
