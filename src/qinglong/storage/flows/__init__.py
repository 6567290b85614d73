"""Flows in storage: the engine that moves a flow run on inside the transaction that ends
a node's Run (release.py) and the publishing of flow revisions (publish.py). The flow
store, which also cancels Runs, is storage/runs/flow_store.py."""
