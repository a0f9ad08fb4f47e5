"""The wiring: assembles store, executor, secrets, agent service and scheduler from settings.

Lite (``lite``) and Pro (``pro``) are two short recipes over the same assembly.
May import services, adapters and core; never ``leoflow.commands``.
"""
