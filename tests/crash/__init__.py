"""The crash test: a worker killed with SIGKILL at random, and a checker of its history.

``python -m tests.crash --kills 200 --jobs 100000`` runs the long version.
"""
