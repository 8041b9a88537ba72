#!/usr/bin/python3
"""Reads an OTF2 archive with the python3-otf2 bindings (Debian) and prints what the export
tests check, as JSON: locations (name, process, events), each process's system tree node, enters and leaves per region, every
MPI send and receive (process, peer, tag, bytes, communicator), every collective end, and the
metric records: how many per metric (its first member's name), the thread-state values and the
counters' values."""
import collections
import json
import sys

import otf2

with otf2.reader.open(sys.argv[1]) as trace:
    defs = trace.definitions
    out = {
        "locations": [{"name": l.name, "group": l.group.name, "events": l.number_of_events}
                      for l in defs.locations],
        "nodes": {g.name: g.system_tree_parent.name for g in defs.location_groups},
        "clock": {"resolution": defs.clock_properties.timer_resolution,
                  "offset": defs.clock_properties.global_offset,
                  "length": defs.clock_properties.trace_length},
        "enter": collections.Counter(), "leave": collections.Counter(),
        "sends": [], "recvs": [], "collectives": [], "events": 0, "backwards": 0,
        "metrics": collections.Counter(), "states": collections.Counter(), "counters": [],
    }
    last = {}
    for location, event in trace.events:
        out["events"] += 1
        if event.time < last.get(location.name + location.group.name, 0):
            out["backwards"] += 1
        last[location.name + location.group.name] = event.time
        if isinstance(event, otf2.events.Enter):
            out["enter"][event.region.name] += 1
        elif isinstance(event, otf2.events.Leave):
            out["leave"][event.region.name] += 1
        elif isinstance(event, (otf2.events.MpiSend, otf2.events.MpiIsend)):
            out["sends"].append([location.group.name, event.receiver, event.msg_tag,
                                 event.msg_length, event.communicator.name])
        elif isinstance(event, otf2.events.MpiRecv):
            out["recvs"].append([location.group.name, event.sender, event.msg_tag,
                                 event.msg_length, event.communicator.name])
        elif isinstance(event, otf2.events.Metric):
            member = event.metric.members[0].name
            out["metrics"][member] += 1
            if member == "thread state":
                out["states"][str(event.values[0])] += 1
            else:
                out["counters"].append([member, event.values[0]])
        elif isinstance(event, otf2.events.MpiCollectiveEnd):
            out["collectives"].append([location.group.name, str(event.collective_op).split(".")[-1],
                                       event.communicator.name, event.size_sent,
                                       event.size_received])
    json.dump(out, sys.stdout)
