#!/usr/bin/python3
"""The pods a Kubernetes manifest of deploy/k8s/ would start, as this machine
can run them (test/k8s_test.sh): for each pod its host name, the command of
its container and its environment, as Kubeflow's training operator (TFJob:
TF_CONFIG), the JobSet controller with the downward API (JobSet) or the Job
controller (an Indexed Job: JOB_COMPLETION_INDEX) would give them. No Kubernetes runs here; this reproduces what the pods would see.

usage: k8s_pods.py MANIFEST [--map PREFIX=DIR ...]
  --map   replaces PREFIX at the start of each command argument (a volume's
          mount path) with DIR (where the test keeps that volume's files)
Prints one JSON object per line: {"name", "host", "role", "index",
"command": [...], "env": {...}}.
"""
import json
import sys

import yaml


def mapped(args, maps):
    out = []
    for a in args:
        a = str(a)
        for prefix, local in maps:
            if a.startswith(prefix):
                a = local + a[len(prefix):]
        out.append(a)
    return out


def container_env(container, labels, index):
    env = {}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = str(e["value"])
            continue
        path = e["valueFrom"]["fieldRef"]["fieldPath"]
        prefix = "metadata.labels['"
        if not path.startswith(prefix):
            raise SystemExit(f"{e['name']}: fieldPath {path} is not a label")
        label = path[len(prefix):-2]
        if label not in labels:
            raise SystemExit(f"{e['name']}: the pod has no label {label}")
        env[e["name"]] = labels[label]
    if index is not None:
        env["JOB_COMPLETION_INDEX"] = str(index)
    return env


def tfjob_pods(doc):
    """Kubeflow's training operator: a pod per replica, host
    <job>-<type>-<i>.<namespace>.svc, TF_CONFIG with every type but the
    evaluator in "cluster" (as the operator writes it)."""
    name = doc["metadata"]["name"]
    ns = doc["metadata"].get("namespace", "default")
    specs = doc["spec"]["tfReplicaSpecs"]
    hosts = {}
    ports = {}
    for rtype, spec in specs.items():
        c = spec["template"]["spec"]["containers"][0]
        port = 2222
        for p in c.get("ports", []):
            if p.get("name") == "tfjob-port":
                port = p["containerPort"]
        t = rtype.lower()
        ports[t] = port
        hosts[t] = [f"{name}-{t}-{i}.{ns}.svc" for i in range(spec["replicas"])]
    cluster = {t: [f"{h}:{ports[t]}" for h in hs]
               for t, hs in hosts.items() if t != "evaluator"}
    for rtype, spec in specs.items():
        t = rtype.lower()
        c = spec["template"]["spec"]["containers"][0]
        for i in range(spec["replicas"]):
            env = container_env(c, {}, None)
            env["TF_CONFIG"] = json.dumps({"cluster": cluster,
                                           "task": {"type": t, "index": i},
                                           "environment": "cloud"})
            yield {"name": f"{name}-{t}-{i}", "host": hosts[t][i], "role": t,
                   "index": i, "command": c["command"], "env": env}


def jobset_pods(doc):
    """The JobSet controller: per replicated job (replicas 1) an Indexed Job
    of `parallelism` pods, host <jobset>-<job>-0-<i>.<subdomain>, the labels
    the downward API reads, JOB_COMPLETION_INDEX from the Job controller."""
    name = doc["metadata"]["name"]
    sub = doc["spec"].get("network", {}).get("subdomain", name)
    for rj in doc["spec"]["replicatedJobs"]:
        if rj.get("replicas", 1) != 1:
            raise SystemExit(f"{rj['name']}: replicas {rj['replicas']}")
        job = rj["template"]["spec"]
        c = job["template"]["spec"]["containers"][0]
        for i in range(job.get("parallelism", 1)):
            labels = {"jobset.sigs.k8s.io/jobset-name": name,
                      "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                      "jobset.sigs.k8s.io/job-index": "0"}
            yield {"name": f"{name}-{rj['name']}-0-{i}",
                   "host": f"{name}-{rj['name']}-0-{i}.{sub}",
                   "role": rj["name"], "index": i, "command": c["command"],
                   "env": container_env(c, labels, i)}


def job_pods(doc):
    """The Job controller: an Indexed Job of `parallelism` pods, host
    <job>-<i> (a plain Job's pods have no stable DNS name; the test maps it
    anyway), JOB_COMPLETION_INDEX from the Job controller, the container's
    own env values (no labels: it is no pod of a JobSet)."""
    name = doc["metadata"]["name"]
    spec = doc["spec"]
    if spec.get("completionMode") != "Indexed":
        raise SystemExit(f"{name}: completionMode is not Indexed")
    c = spec["template"]["spec"]["containers"][0]
    for i in range(spec.get("parallelism", 1)):
        yield {"name": f"{name}-{i}", "host": f"{name}-{i}", "role": "job",
               "index": i, "command": c["command"],
               "env": container_env(c, {}, i)}


def main():
    args = sys.argv[1:]
    if not args:
        raise SystemExit(__doc__)
    manifest = args[0]
    maps = []
    k = 1
    while k < len(args):
        if args[k] != "--map" or k + 1 >= len(args) or "=" not in args[k + 1]:
            raise SystemExit(__doc__)
        prefix, local = args[k + 1].split("=", 1)
        maps.append((prefix, local))
        k += 2
    with open(manifest) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for doc in docs:
        kind = doc.get("kind")
        pods = tfjob_pods(doc) if kind == "TFJob" else \
            jobset_pods(doc) if kind == "JobSet" else \
            job_pods(doc) if kind == "Job" else None
        if pods is None:
            raise SystemExit(f"{manifest}: kind {kind}: not a TFJob, JobSet "
                             "or Job")
        for pod in pods:
            pod["command"] = mapped(pod["command"], maps)
            print(json.dumps(pod))


main()
