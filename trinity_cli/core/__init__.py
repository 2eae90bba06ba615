"""The routing core: transcript, policy head and turn loop. Pure: no I/O, no clients, no env."""
