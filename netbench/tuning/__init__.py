"""`netbench tune`: measure, tune, measure again, keep what helped, revert
what did not (`loop`); the decision from the two sessions' comparison,
pure (`decision`); the tuning session's record (`record`) and page
(`page`); how it runs Ansible (`engine`); what a host has of the settings
profiles change (`readback`, run on the hosts); the likely cause of a
curve that falls short (`diagnosis`).
"""
