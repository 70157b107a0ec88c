#!/usr/bin/env python3
"""A mobile-style Vestibule client in Python, written from the OpenAPI document alone.

It reads /api/v1/openapi.json, finds each operation by its operationId (never a hard-coded
path), joins a room with an Idempotency-Key, polls at the server's nextPollAfterMs hint,
honours Retry-After on 429/503/504, switches to the Server-Sent Events stream, and either leaves
(--leave) or prints the entry token once admitted.

    python3 examples/python_client.py --base http://127.0.0.1:8080 --room main --polls 2 --leave

Needs: httpx, httpx-sse (pip install httpx httpx-sse). Exit status 0 when the flow completed.
"""

import argparse
import json
import secrets
import sys
import time

import httpx
from httpx_sse import connect_sse

RETRYABLE = {429, 503, 504}


def operations(document):
    """operationId -> (METHOD, path template) from the document."""
    found = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "operationId" in operation:
                found[operation["operationId"]] = (method.upper(), path)
    return found


def required_fields(document, schema_name):
    return document["components"]["schemas"][schema_name].get("required", [])


def call(client, ops, operation_id, params, headers=None, attempts=8):
    """One API call, retried on 429/503/504 after Retry-After (same headers: same key)."""
    method, template = ops[operation_id]
    url = template.format(**params)
    for _ in range(attempts):
        response = client.request(method, url, headers=headers or {})
        if response.status_code not in RETRYABLE:
            return response
        wait = float(response.headers.get("Retry-After", "1"))
        print(f"{operation_id}: {response.status_code}, retrying after {wait} s", flush=True)
        time.sleep(wait)
    return response


def check_status(document, status):
    missing = [f for f in required_fields(document, "TicketStatus") if f not in status]
    if missing:
        raise SystemExit(f"TicketStatus without {missing}: {status}")
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="e.g. http://127.0.0.1:8080")
    parser.add_argument("--room", default="main")
    parser.add_argument("--polls", type=int, default=2, help="polls before switching to SSE")
    parser.add_argument("--leave", action="store_true", help="leave instead of waiting for a token")
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many s")
    args = parser.parse_args()

    with httpx.Client(base_url=args.base, timeout=10.0) as client:
        document = client.get("/api/v1/openapi.json").json()
        ops = operations(document)
        for needed in ("join", "poll", "events", "leave"):
            if needed not in ops:
                raise SystemExit(f"the document has no {needed} operation")

        key = secrets.token_hex(16)  # kept for retries: the same key returns the same ticket
        joined = call(client, ops, "join", {"room": args.room}, {"Idempotency-Key": key})
        if joined.status_code not in (200, 201):
            raise SystemExit(f"join answered {joined.status_code}: {joined.text}")
        status = check_status(document, joined.json())
        again = call(client, ops, "join", {"room": args.room}, {"Idempotency-Key": key})
        if again.json()["ticketId"] != status["ticketId"]:
            raise SystemExit("a retried join with the same key got another ticket")
        ticket = {"room": args.room, "ticketId": status["ticketId"]}
        print(f"joined: position {status['position']}, eta {status['etaSeconds']} s", flush=True)

        deadline = time.monotonic() + args.timeout
        polls = 0
        while status["status"] == "WAITING" and polls < args.polls:
            time.sleep(status["nextPollAfterMs"] / 1000)
            status = check_status(document, call(client, ops, "poll", ticket).json())
            polls += 1
            print(f"poll {polls}: {status['status']} position {status['position']} "
                  f"next poll in {status['nextPollAfterMs']} ms", flush=True)

        # Switch to the event stream: one `status` event per change, TicketStatus JSON.
        method, template = ops["events"]
        events = 0
        if status["status"] == "WAITING" and not args.leave:
            with connect_sse(client, method, template.format(**ticket), timeout=40.0) as source:
                for event in source.iter_sse():
                    if event.event != "status":
                        continue
                    status = check_status(document, json.loads(event.data))
                    events += 1
                    print(f"event {event.id}: {status['status']} position {status['position']}",
                          flush=True)
                    if status["status"] != "WAITING" or time.monotonic() > deadline:
                        break
        elif args.leave:
            with connect_sse(client, method, template.format(**ticket), timeout=40.0) as source:
                for event in source.iter_sse():
                    status = check_status(document, json.loads(event.data))
                    events += 1
                    print(f"event {event.id}: {status['status']}", flush=True)
                    break

        if args.leave:
            left = call(client, ops, "leave", ticket)
            if left.status_code != 204:
                raise SystemExit(f"leave answered {left.status_code}: {left.text}")
            status = check_status(document, call(client, ops, "poll", ticket).json())
            print(f"left: {status['status']}", flush=True)
            ok = status["status"] == "LEFT"
        else:
            ok = status["status"] == "TOKEN_ISSUED" and status["entryToken"]
            if ok:
                print(f"admitted: entry token until {status['tokenExpiresAt']}", flush=True)
        print(json.dumps({"polls": polls, "events": events, "final": status["status"]}))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
