"""An HTTP/2 (h2c, prior knowledge) client that reads one answer slowly, with the `h2` library.

Usage: h2_slow_reader.py HOST PORT PATH WINDOW PAUSE_SECS

It announces a stream window of WINDOW bytes and gives back what it received only every
PAUSE_SECS, so the server can send at most WINDOW bytes per pause: a slow mobile link, or a
client that never reads (WINDOW_UPDATE never sent when PAUSE_SECS is 0). It prints one JSON line:
{"status": ..., "bytes": ..., "ended": true when END_STREAM came, "closed_after": secs or null,
"goaway": true when the server sent GOAWAY}.
"""

import json
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings


def main() -> None:
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    window, pause = int(sys.argv[4]), float(sys.argv[5])
    sock = socket.create_connection((host, port))
    sock.settimeout(0.2)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.local_settings = h2.settings.Settings(
        client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window}
    )
    conn.initiate_connection()
    stream = conn.get_next_available_stream_id()
    conn.send_headers(
        stream,
        [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", host)],
        end_stream=True,
    )
    sock.sendall(conn.data_to_send())
    started = time.monotonic()
    status, received, unacked, ended, goaway, closed_after = None, 0, 0, False, False, None
    last_ack = started
    raw, by_hand = b"", []
    while not ended and time.monotonic() - started < 120:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            data = None
        if data == b"":
            closed_after = time.monotonic() - started
            break
        if goaway and data:
            # The library takes any GOAWAY as the end of the connection, but a stream the
            # GOAWAY lets finish goes on: read its frames by hand from here.
            raw += data
            while len(raw) >= 9:
                length = int.from_bytes(raw[:3], "big")
                if len(raw) < 9 + length:
                    break
                kind, flags, payload = raw[3], raw[4], raw[9 : 9 + length]
                raw = raw[9 + length :]
                if kind == 0x0:
                    received += length
                    unacked += length
                    ended = ended or bool(flags & 0x1)
                elif kind == 0x6 and not flags & 0x1:
                    # Answer the server's closing ping, as a live client does.
                    by_hand.append(b"\x00\x00\x08\x06\x01\x00\x00\x00\x00" + payload)
        elif data:
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                goaway = True
                events = []
            for event in events:
                if isinstance(event, h2.events.ResponseReceived):
                    status = dict(event.headers).get(b":status", b"").decode()
                elif isinstance(event, h2.events.DataReceived):
                    received += len(event.data)
                    unacked += event.flow_controlled_length
                elif isinstance(event, h2.events.StreamEnded):
                    ended = True
                elif isinstance(event, h2.events.ConnectionTerminated):
                    goaway = True
        if pause > 0 and unacked and time.monotonic() - last_ack >= pause:
            if goaway:
                for target in (0, stream):
                    increment = unacked.to_bytes(4, "big")
                    by_hand.append(b"\x00\x00\x04\x08\x00" + target.to_bytes(4, "big") + increment)
            else:
                conn.acknowledge_received_data(unacked, stream)
            unacked, last_ack = 0, time.monotonic()
        outgoing = b"".join(by_hand) if goaway else conn.data_to_send()
        by_hand.clear()
        if outgoing:
            try:
                sock.sendall(outgoing)
            except OSError:
                closed_after = time.monotonic() - started
                break
    print(
        json.dumps(
            {
                "status": status,
                "bytes": received,
                "ended": ended,
                "closed_after": closed_after,
                "goaway": goaway,
            }
        )
    )


if __name__ == "__main__":
    main()
