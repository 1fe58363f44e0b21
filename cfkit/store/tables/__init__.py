"""Each store table's schema (its DDL and migrations), one module per owner, named as the owner is.

An owner module (:mod:`cfkit.store.edits`, …) holds every statement on its
tables but these and re-exports them; :mod:`cfkit.store` reads them from here
when it creates or migrates a store, so a new store costs no import of the
owners' records.
"""
