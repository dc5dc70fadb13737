"""Stand-ins for servers that are not IntraBench model servers of this version, run as
``python garbage_server.py KIND``: ``http`` answers like a web server, ``version`` speaks
model protocol 99, ``silent`` never answers, ``exit`` exits at once with a message."""

import sys
import time

kind = sys.argv[1]
if kind == "http":
    sys.stdout.write("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    sys.stdout.flush()
    time.sleep(30)
elif kind == "version":
    from intrabench.serving.wire import Channel

    channel = Channel(0, 1, peer="the client")
    channel.receive()
    channel.send({"ok": True, "protocol": 99, "model": {}})
    time.sleep(30)
elif kind == "silent":
    time.sleep(30)
elif kind == "exit":
    print("this environment has no torch", file=sys.stderr)
    sys.exit(3)
