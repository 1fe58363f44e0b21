"""Helpers the tests share: servers on 127.0.0.1 speaking providers' wire formats, workspace builders,
the CLI run in-process, and the one module of raw SQL (store_sql). Test modules import from here, never
from conftest.py or from one another."""
