"""CLI commands that live in their own modules.

Each module here defines ``command`` (a click command) and is registered on the ``skillvc``
group automatically (see ``skillvc.cli``). Keep module-level imports light: heavy imports go
inside the command function, so ``skillvc --help`` stays fast.
"""
