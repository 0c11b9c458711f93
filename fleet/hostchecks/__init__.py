"""Read-only checks a host agent runs on a GPU host, in place of the guide's shell commands
(`dmesg | grep -i oom`, `ps aux | grep vllm`, `free -h`, `df -h`, `ss -tlnp`, `numactl`): each
module reads the host through a `root` path (`/` on a host, a fixture tree in the tests), reads
every file with a bound, never raises on what it finds, and returns frozen results whose
`to_dict()` is JSON-ready; anything it could not read is said in the result, as a message the
console translates when it shows it.
"""
