"""The scheduler: one loop (``core``) and its collaborators, each a file for one idea.

``book`` the runs and task instances in memory, and their slots; ``transitions``
what a tick does to them; ``timers`` what time alone changes; ``run_creation``
triggers, cron and max_active_runs; ``follow`` what other writers put in the store;
``recovery`` resuming after a restart; ``commit`` the tick's group commit; ``batch``
what one tick decided. The agent endpoint (``agent_endpoint``, ``agent_service``)
serves task agents over gRPC.

Never imports the API, the web UI, the entry points (cli, lite, pro) or Kubernetes.
"""
