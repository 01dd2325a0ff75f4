"""The client path: a fixed workload sent to an engine, every streamed chunk stamped on arrival.

workload (prompts -> RequestSpec) -> protocols (request body, stream events per API) ->
transport (send -> RequestRecord) -> dispatch (exactly N requests across users and processes);
run.py ties them into one measured run; options, targets and probe check everything before it.
"""
