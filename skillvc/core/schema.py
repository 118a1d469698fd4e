"""The event log's schema version (``PRAGMA user_version``).

Bump it with every new migration in ``skillvc/core/migrations.py``. It lives in its own module so
opening a current database needs neither sqlite-utils nor the migration set.
"""

SCHEMA_VERSION = 3
