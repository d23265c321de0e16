"""The compile server: one process per user and cache root that keeps Slang and NVRTC warm
between the user's processes (``serve``), the client that asks it and starts it (``client``),
the typed messages between them (``messages``) in length-prefixed frames (``frames``), and
where its socket and log live (``place``).

    python -m slangspec.compile.server --cache-dir DIR [--arch sm_90]
"""
