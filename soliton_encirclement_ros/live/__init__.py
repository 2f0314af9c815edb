"""
The live view: the swarm's topics relayed to Foxglove (or Lichtblick) through ``foxglove-sdk``.

``FoxgloveRelay`` serves a graph's messages, as received (CDR), on an in-process Foxglove
WebSocket server; ``swarm_sim --foxglove`` and the ``live_view`` node use it. Needs the optional
``live`` extra (``pip install foxglove-sdk``).
"""
