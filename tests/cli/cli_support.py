"""Constants and helpers of the command-line tests (the fixtures are in conftest.py)."""


#: the first five labels of every summary block
SUMMARY_LABELS = ["objective", "status", "bound", "method", "time"]
#: the top-level keys every result's JSON shares
SHARED_KEYS = {"objective", "status", "lower_bound", "gap", "method", "seed", "runtime_s", "stats", "stages", "notes"}
GIB = 2**30

TINY_PIPER = {
    "maxDevices": 2, "maxMemoryPerDevice": 100.0, "bandwidth": 1.0, "mbsInBatch": 2,
    "nodes": [
        {"id": 10, "TMPCs": {"1": [{"id": "vanilla", "timePerSample": 1.0, "parameterSize": 1.0, "memoryUsageA": 1.0,
                                    "memoryUsageB": 1.0, "syncTimeFw": {}, "syncTimeBw": {"11": 0.0}}]}},
        {"id": 11, "TMPCs": {"1": [{"id": "vanilla", "timePerSample": 2.0, "parameterSize": 1.0, "memoryUsageA": 1.0,
                                    "memoryUsageB": 1.0, "syncTimeFw": {"10": 0.0}, "syncTimeBw": {}}]}},
    ],
    "edges": [{"sourceId": 10, "destId": 11, "communicationCost": 4.0}],
}


def labels(text):
    """The label of each line of a summary block."""
    return [line.split()[0] for line in text.splitlines() if line.strip()]
