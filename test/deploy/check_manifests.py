#!/usr/bin/env python3
"""Structural checks of the deployment YAML that no linter here can do.

    check_manifests.py kubernetes DEPLOY_KUBERNETES_DIR
    check_manifests.py prometheus DEPLOY_PROMETHEUS_DIR METRICS_FIXTURE

There is no API server on the build machines (and kubectl validation needs
one), so the fields the daemon's contract depends on are asserted directly:
a wrong probe path or a sidecar that is a plain container still "applies"
but breaks at run time.  Prints one line per check; exit 1 if any failed.
"""

import glob
import os
import re
import sys

import yaml

LISTEN_PORT = 9473
CONFIG_DIR = "/etc/compactiond"
CONFIG_FILE = CONFIG_DIR + "/compactiond.conf"
# Pods allowed to reach the metrics port (networkpolicy.yaml documents them).
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}
MONITORING_NAMESPACE = {"kubernetes.io/metadata.name": "monitoring"}

failures = 0


def check(ok, what, detail=""):
    global failures
    if ok:
        print(f"OK   {what}")
    else:
        failures += 1
        print(f"FAIL {what}" + (f": {detail}" if detail else ""))


def load_all(directory):
    """Returns [(file basename, document)] for every YAML document."""
    docs = []
    for path in sorted(glob.glob(os.path.join(directory, "*.yaml")) +
                       glob.glob(os.path.join(directory, "*.yml"))):
        name = os.path.basename(path)
        try:
            with open(path, encoding="utf-8") as f:
                parsed = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            check(False, f"{name} parses", str(e).replace("\n", " "))
            continue
        complete = all(isinstance(d, dict) and d.get("apiVersion") and
                       d.get("kind") and (d.get("metadata") or {}).get("name")
                       for d in parsed)
        check(bool(parsed) and complete,
              f"{name} parses ({len(parsed)} documents with apiVersion/kind/name)")
        docs += [(name, d) for d in parsed]
    return docs


def strings(node):
    """Yields every string value (and key) of a parsed document."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)
    elif isinstance(node, str):
        yield node


def pod_specs(docs):
    """Yields (label, workload, pod template metadata, pod spec) of every workload."""
    for name, d in docs:
        kind = d["kind"]
        spec = d.get("spec") or {}
        if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            tmpl = spec.get("template") or {}
        elif kind == "CronJob":
            tmpl = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
        else:
            continue
        yield (f"{name} {kind}/{d['metadata']['name']}", d,
               tmpl.get("metadata") or {}, tmpl.get("spec") or {})


def env_of(container):
    return {e.get("name"): e for e in container.get("env") or []}


def is_compactiond(container):
    argv = list(container.get("command") or []) + list(container.get("args") or [])
    return any(str(a).endswith("compactiond") for a in argv) or container.get("name") == "compactiond"


def check_container_hardening(label, pod, c):
    psc = pod.get("securityContext") or {}
    csc = c.get("securityContext") or {}

    def effective(key):
        return csc.get(key, psc.get(key))

    seccomp = (effective("seccompProfile") or {}).get("type")
    drops = ((csc.get("capabilities") or {}).get("drop")) or []
    res = c.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    where = f"{label} container {c.get('name')}"
    check(effective("runAsNonRoot") is True, f"{where}: runAsNonRoot")
    check(csc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem")
    check(csc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation false")
    check("ALL" in drops, f"{where}: capabilities drop ALL", f"drop={drops}")
    check(seccomp == "RuntimeDefault", f"{where}: seccomp RuntimeDefault", f"got {seccomp}")
    check({"cpu", "memory"} <= limits.keys() and {"cpu", "memory"} <= requests.keys(),
          f"{where}: resources requests and limits (cpu, memory)", f"got {res}")


def mount_of(container, path):
    """The volumeMount of `container` whose mountPath holds `path`, or None."""
    for m in container.get("volumeMounts") or []:
        mp = (m.get("mountPath") or "").rstrip("/")
        if mp and os.path.dirname(path) == mp:
            return m
    return None


def secret_volume_mode_ok(volume):
    """A Secret volume readable by its owner only: defaultMode 0400 and no item
    mode with group or other bits (YAML 0400 is the integer 256)."""
    secret = volume.get("secret") or {}
    modes = [secret.get("defaultMode")] + [i.get("mode") for i in secret.get("items") or []
                                           if "mode" in i]
    return modes[0] == 0o400 and all(isinstance(m, int) and m & 0o077 == 0 for m in modes)


def check_passfile(label, pod, c):
    """PGPASSFILE names a file that comes from a Secret mounted 0400, either
    directly or copied by an init container into an emptyDir; no PGPASSWORD."""
    where = f"{label} compactiond"
    env = env_of(c)
    check("PGPASSWORD" not in env, f"{where}: no PGPASSWORD (the passfile has it)",
          f"got {env.get('PGPASSWORD')}")
    path = (env.get("PGPASSFILE") or {}).get("value") or ""
    mount = mount_of(c, path) if path.startswith("/") else None
    check(bool(mount) and mount.get("readOnly") is True,
          f"{where}: PGPASSFILE set to a file on a read-only mount", f"PGPASSFILE={path!r}")
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    secrets = [v for v in volumes.values() if "secret" in v]
    check(bool(secrets) and all(secret_volume_mode_ok(v) for v in secrets),
          f"{label}: Secret volumes mounted with defaultMode 0400",
          f"got {[(v.get('name'), v['secret'].get('defaultMode')) for v in secrets]}")
    if not mount:
        return
    volume = volumes.get(mount.get("name")) or {}
    if "secret" in volume:
        check(True, f"{where}: passfile straight from a Secret volume")
        return
    # A copy: an init container that runs before compactiond reads a Secret
    # volume and writes into this (memory-backed) emptyDir.
    init = pod.get("initContainers") or []
    order = [i for i, x in enumerate(init) if x is c]
    before = init[:order[0]] if order else init
    copiers = [x for x in before
               if any(m.get("name") == mount.get("name") and not m.get("readOnly")
                      for m in x.get("volumeMounts") or [])
               and any("secret" in (volumes.get(m.get("name")) or {})
                       for m in x.get("volumeMounts") or [])]
    check((volume.get("emptyDir") or {}).get("medium") == "Memory" and bool(copiers),
          f"{where}: passfile copied from the Secret into a memory emptyDir before it starts",
          f"volume={volume} copiers={[x.get('name') for x in copiers]}")
    # 0600 on the copy: the kubelet makes Secret files 0440 under an fsGroup,
    # which libpq refuses, so the copy must set its own mode.
    script = " ".join(str(a) for x in copiers
                      for a in (x.get("command") or []) + (x.get("args") or []))
    check(re.search(r"umask 0?077|install -m 0?600|chmod 0?600", script) is not None,
          f"{where}: the passfile copy is made 0600", f"got {script!r}")
    check((pod.get("securityContext") or {}).get("fsGroup") is not None,
          f"{label}: fsGroup set, so the non-root copier can read the Secret")


def check_tls(label, pod, c, configmaps):
    """db in the mounted config uses sslmode=verify-full with an sslrootcert
    that is mounted into the container."""
    where = f"{label} compactiond"
    conf = ""
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    mount = mount_of(c, CONFIG_FILE)
    if mount:
        cm = (volumes.get(mount.get("name")) or {}).get("configMap", {}).get("name")
        conf = (configmaps.get(cm) or {}).get("compactiond.conf", "")
    db = " ".join(re.findall(r"^\s*db\s*=\s*(.*)$", conf, re.M))
    check("sslmode=verify-full" in db.split(), f"{where}: db uses sslmode=verify-full",
          f"db={db!r}")
    root = re.search(r"\bsslrootcert=(\S+)", db)
    root_mount = mount_of(c, root.group(1)) if root else None
    check(bool(root_mount) and root_mount.get("readOnly") is True,
          f"{where}: sslrootcert is a file on a read-only mount",
          f"sslrootcert={root.group(1) if root else None}")


def check_compactiond_common(label, pod, c, configmaps):
    where = f"{label} compactiond"
    check_passfile(label, pod, c)
    check_tls(label, pod, c, configmaps)

    argv = list(c.get("command") or []) + list(c.get("args") or [])
    check(argv[:1] == ["/usr/bin/compactiond"] and
          any(argv[i:i + 2] == ["--config", CONFIG_FILE] for i in range(len(argv))),
          f"{where}: runs /usr/bin/compactiond --config {CONFIG_FILE}", f"argv={argv}")

    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    mounts = [m for m in c.get("volumeMounts") or [] if m.get("mountPath") == CONFIG_DIR]
    cm = (volumes.get(mounts[0].get("name")) or {}).get("configMap", {}).get("name") if mounts else None
    check(bool(mounts) and mounts[0].get("readOnly") is True and cm in configmaps and
          "compactiond.conf" in configmaps[cm],
          f"{where}: ConfigMap with compactiond.conf mounted read-only at {CONFIG_DIR}",
          f"mounts={mounts} configMap={cm}")

    # Service links inject <SERVICE>_PORT=... variables, and a Service named
    # compactiond would hit the daemon's COMPACTIOND_ environment prefix.
    check(pod.get("enableServiceLinks") is False, f"{label}: enableServiceLinks false")
    grace = pod.get("terminationGracePeriodSeconds")
    check(isinstance(grace, int) and grace >= 10,
          f"{label}: terminationGracePeriodSeconds >= 10", f"got {grace}")


def check_kubernetes(directory):
    docs = load_all(directory)
    check(bool(docs), f"YAML found under {directory}")

    configmaps = {d["metadata"]["name"]: (d.get("data") or {})
                  for _, d in docs if d["kind"] == "ConfigMap"}

    # No credential may live in these files: the password only ever arrives
    # through a Secret reference.
    literal = re.compile(r"password\s*=|postgres(?:ql)?://[^/@\s:]+:[^/@\s]+@", re.I)
    leaks = [f"{n}: {line.strip()[:80]}" for n, d in docs for s in strings(d)
             for line in s.splitlines() if literal.search(line)]
    for n, d in docs:
        if d["kind"] == "Secret" and (d.get("data") or d.get("stringData")):
            leaks.append(f"{n}: Secret/{d['metadata']['name']} carries data")
        for _, _, _, pod in pod_specs([(n, d)]):
            for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
                for e in c.get("env") or []:
                    if "PASSWORD" in str(e.get("name", "")).upper() and "value" in e:
                        leaks.append(f"{n}: env {e['name']} has a literal value")
    check(not leaks, "no password literal in any manifest", "; ".join(leaks))
    weak = sorted({m for _, d in docs for s in strings(d)
                   for m in re.findall(r"sslmode=(\w[\w-]*)", s) if m != "verify-full"})
    check(not weak, "every sslmode in the manifests is verify-full", f"found {weak}")

    sidecars = 0
    workloads = {d["kind"] for _, d in docs}
    for label, workload, meta, pod in pod_specs(docs):
        init = pod.get("initContainers") or []
        main = pod.get("containers") or []
        for c in init + main:
            check_container_hardening(label, pod, c)
        check(not any(is_compactiond(c) and "run" in (c.get("args") or []) for c in main),
              f"{label}: compactiond run is not a plain container")

        for c in init:
            if not is_compactiond(c):
                continue
            sidecars += 1
            check(c.get("restartPolicy") == "Always",
                  f"{label}: compactiond is a native sidecar (initContainer, restartPolicy Always)",
                  f"got {c.get('restartPolicy')}")
            check("run" in (c.get("args") or []), f"{label}: sidecar runs `compactiond run`")
            check_compactiond_common(label, pod, c, configmaps)
            ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
            check(ports.get("metrics") == LISTEN_PORT, f"{label}: port metrics={LISTEN_PORT}",
                  f"got {ports}")
            listen = (env_of(c).get("COMPACTIOND_LISTEN") or {}).get("value")
            check(listen == f"0.0.0.0:{LISTEN_PORT}",
                  f"{label}: COMPACTIOND_LISTEN=0.0.0.0:{LISTEN_PORT}", f"got {listen}")
            for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
                get = (c.get(probe) or {}).get("httpGet") or {}
                check(get.get("path") == path and get.get("port") in ("metrics", LISTEN_PORT),
                      f"{label}: {probe} GET {path} on port metrics", f"got {get}")
            ann = meta.get("annotations") or {}
            want = {"prometheus.io/scrape": "true", "prometheus.io/port": str(LISTEN_PORT),
                    "prometheus.io/path": "/metrics"}
            got = {k: ann.get(k) for k in want}
            check(got == want, f"{label}: prometheus.io scrape annotations", f"got {got}")

        if workload["kind"] == "CronJob":
            job = [c for c in main if is_compactiond(c)]
            args = (job[0].get("args") or []) if job else []
            check(bool(job) and "sweep" in args and "--once" in args,
                  f"{label}: runs `compactiond sweep --once`", f"args={args}")
            if job:
                check_compactiond_common(label, pod, job[0], configmaps)
            check(workload["spec"].get("concurrencyPolicy") == "Forbid",
                  f"{label}: concurrencyPolicy Forbid")
            check(pod.get("restartPolicy") in ("Never", "OnFailure"),
                  f"{label}: restartPolicy Never/OnFailure")

    check(sidecars >= 1, "a Deployment carries compactiond as native sidecar")
    check("CronJob" in workloads, "a CronJob alternative exists")

    # The PodMonitor must select the sidecar pods and scrape the named port.
    pod_labels = [meta.get("labels") or {} for _, _, meta, pod in pod_specs(docs)
                  if any(is_compactiond(c) and c.get("restartPolicy") == "Always"
                         for c in pod.get("initContainers") or [])]
    monitors = [d for _, d in docs if d["kind"] == "PodMonitor"]
    check(len(monitors) == 1 and monitors[0]["apiVersion"] == "monitoring.coreos.com/v1",
          "one PodMonitor (monitoring.coreos.com/v1)")
    for m in monitors:
        spec = m.get("spec") or {}
        sel = (spec.get("selector") or {}).get("matchLabels") or {}
        check(bool(sel) and any(sel.items() <= l.items() for l in pod_labels),
              "PodMonitor selector matches the sidecar pods", f"selector={sel}")
        eps = spec.get("podMetricsEndpoints") or []
        check(any(e.get("port") == "metrics" and e.get("path") == "/metrics" for e in eps),
              "PodMonitor scrapes port metrics, path /metrics", f"got {eps}")
        job = [r for e in eps for r in e.get("relabelings") or []
               if r.get("targetLabel") == "job" and r.get("replacement") == "compactiond"]
        check(bool(job), "PodMonitor sets job=compactiond (alerts select on it)")

    check_network_policies(docs, pod_labels)


def rule_ports(rule):
    """The ports an ingress rule opens: None for all of them."""
    ports = rule.get("ports")
    return None if not ports else [p.get("port") for p in ports]


def is_prometheus_peer(peer):
    ns = (peer.get("namespaceSelector") or {}).get("matchLabels") or {}
    pods = (peer.get("podSelector") or {}).get("matchLabels") or {}
    return (set(peer) == {"namespaceSelector", "podSelector"} and
            MONITORING_NAMESPACE.items() <= ns.items() and PROMETHEUS_POD.items() <= pods.items())


def check_network_policies(docs, sidecar_pod_labels):
    """The metrics port of the sidecar pods is reachable from Prometheus only,
    and the CronJob's pods take no ingress."""
    policies = [d for _, d in docs if d["kind"] == "NetworkPolicy"]
    check(bool(policies) and all(p["apiVersion"] == "networking.k8s.io/v1" for p in policies),
          "NetworkPolicy shipped (networking.k8s.io/v1)")

    def selecting(labels):
        out = []
        for p in policies:
            spec = p.get("spec") or {}
            sel = (spec.get("podSelector") or {}).get("matchLabels") or {}
            if sel.items() <= labels.items() and "Ingress" in (spec.get("policyTypes") or []):
                out.append(p)
        return out

    for labels in sidecar_pod_labels:
        chosen = selecting(labels)
        check(bool(chosen), "a NetworkPolicy (Ingress) selects the compactiond sidecar pods",
              f"pod labels {labels}")
        rules = [r for p in chosen for r in (p.get("spec") or {}).get("ingress") or []]
        opening = [r for r in rules
                   if rule_ports(r) is None or LISTEN_PORT in rule_ports(r)
                   or "metrics" in rule_ports(r)]
        check(bool(opening) and all(r.get("from") and all(is_prometheus_peer(x) for x in r["from"])
                                    for r in opening),
              f"port {LISTEN_PORT} admits only Prometheus pods "
              f"({PROMETHEUS_POD} in namespace {MONITORING_NAMESPACE})", f"rules={opening}")

    for _, _, meta, pod in pod_specs(docs):
        if not any(is_compactiond(c) for c in pod.get("containers") or []):
            continue
        labels = meta.get("labels") or {}
        chosen = selecting(labels)
        open_rules = [r for p in chosen for r in (p.get("spec") or {}).get("ingress") or []]
        check(bool(chosen) and not open_rules,
              "a NetworkPolicy denies all ingress to the CronJob's pods", f"labels={labels}")


def check_prometheus(directory, fixture):
    with open(os.path.join(directory, "prometheus.yml"), encoding="utf-8") as f:
        conf = yaml.safe_load(f)
    check("alerts.yml" in (conf.get("rule_files") or []), "prometheus.yml loads alerts.yml")
    jobs = {j.get("job_name"): j for j in conf.get("scrape_configs") or []}
    targets = [t for sc in (jobs.get("compactiond") or {}).get("static_configs") or []
               for t in sc.get("targets") or []]
    check(f"localhost:{LISTEN_PORT}" in targets,
          f"prometheus.yml job compactiond scrapes localhost:{LISTEN_PORT}", f"got {targets}")

    # Every compaction_* name an alert uses must be one the daemon exports
    # (the fixture mirrors the metrics contract); a typo would make the alert
    # silently never fire, and promtool cannot know.
    exported = set()
    with open(fixture, encoding="utf-8") as f:
        for line in f:
            if line.startswith("# TYPE "):
                name, kind = line.split()[2:4]
                exported.add(name)
                if kind == "histogram":
                    exported |= {name + s for s in ("_bucket", "_sum", "_count")}
    with open(os.path.join(directory, "alerts.yml"), encoding="utf-8") as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
    used = {n for r in rules for n in re.findall(r"\bcompaction_[a-z0-9_]+", r["expr"])}
    unknown = sorted(used - exported)
    check(bool(used) and not unknown, f"alerts.yml uses only exported metrics ({len(used)} names)",
          f"unknown: {unknown}")
    missing = [r.get("alert") for r in rules if not (r.get("labels") or {}).get("severity")
               or not (r.get("annotations") or {}).get("summary")]
    check(not missing, "every alert has a severity and a summary", f"missing: {missing}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "kubernetes":
        check_kubernetes(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "prometheus":
        check_prometheus(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
