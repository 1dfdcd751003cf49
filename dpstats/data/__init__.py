"""Data: replication packages (corpus), problem instances and their public facts."""
