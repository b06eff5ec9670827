#!/usr/bin/env python3
"""k8scheck.py MANIFEST ROOT: checks contrib/kubernetes/sluice.yaml offline.

Every document has apiVersion, kind and a name in namespace sluice; the
DaemonSet's selector matches its pods, every mount names a volume, every
ConfigMap or Secret a volume names is there or is one of the Secrets the
README makes; the sluiced container runs unprivileged on a read-only root;
the setup container may change nftables; sluiced.yaml's paths are the
mounts that carry them (policies from the ConfigMap, watched; secrets
from the Secret).  Then sluiced.yaml and the policies are written under
ROOT with every path moved under ROOT, for sluiced --check.  Prints the
configuration's path; a problem: its message on stderr, exit 1.
"""
import os
import sys

import yaml

EXTERNAL_SECRETS = {"sluice-keys", "sluice-secrets"}   # made by the README's commands


def fail(msg):
    print("k8scheck: " + msg, file=sys.stderr)
    sys.exit(1)


def need(cond, msg):
    if not cond:
        fail(msg)


def main():
    manifest, root = sys.argv[1], sys.argv[2]
    with open(manifest) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    by_kind = {}
    for d in docs:
        for k in ("apiVersion", "kind", "metadata"):
            need(k in d, "a document without %s" % k)
        need(d["metadata"].get("name"), "a %s without a name" % d["kind"])
        if d["kind"] != "Namespace":
            need(d["metadata"].get("namespace") == "sluice",
                 "%s/%s is not in namespace sluice" % (d["kind"], d["metadata"]["name"]))
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    for kind in ("Namespace", "ServiceAccount", "ConfigMap", "DaemonSet"):
        need(kind in by_kind, "no %s" % kind)
    ds = by_kind["DaemonSet"]["sluice"]
    need(ds["apiVersion"] == "apps/v1", "DaemonSet apiVersion %s" % ds["apiVersion"])
    tpl = ds["spec"]["template"]
    sel = ds["spec"]["selector"]["matchLabels"]
    need(all(tpl["metadata"]["labels"].get(k) == v for k, v in sel.items()),
         "the selector does not match the pods' labels")
    pod = tpl["spec"]
    need(pod.get("hostNetwork") is True, "the pods are not on the host network")
    need(pod.get("serviceAccountName") in by_kind["ServiceAccount"], "unknown service account")
    volumes = {v["name"]: v for v in pod["volumes"]}
    for v in volumes.values():
        if "configMap" in v:
            need(v["configMap"]["name"] in by_kind["ConfigMap"],
                 "volume %s names ConfigMap %s, not in the file" % (v["name"], v["configMap"]["name"]))
        if "secret" in v:
            need(v["secret"]["secretName"] in EXTERNAL_SECRETS | set(by_kind.get("Secret", {})),
                 "volume %s names an unknown Secret" % v["name"])
    containers = {c["name"]: c for c in pod["containers"]}
    inits = {c["name"]: c for c in pod.get("initContainers", [])}
    for c in list(containers.values()) + list(inits.values()):
        need(c.get("image"), "container %s has no image" % c["name"])
        for m in c.get("volumeMounts", []):
            need(m["name"] in volumes, "container %s mounts unknown volume %s" % (c["name"], m["name"]))
    need("sluiced" in containers, "no container sluiced")
    main_c = containers["sluiced"]
    sc = main_c.get("securityContext", {})
    need(sc.get("runAsNonRoot") is True and sc.get("runAsUser", 0) != 0, "sluiced may run as root")
    need(sc.get("readOnlyRootFilesystem") is True, "sluiced's root file system is writable")
    need(sc.get("allowPrivilegeEscalation") is False, "sluiced may escalate privileges")
    need("ALL" in sc.get("capabilities", {}).get("drop", []) and
         not sc.get("capabilities", {}).get("add"), "sluiced keeps capabilities")
    need(any("NET_ADMIN" in c.get("securityContext", {}).get("capabilities", {}).get("add", [])
             for c in inits.values()), "no setup container may load the nftables rules")
    need(any("nft -f" in " ".join(c.get("command", []) + c.get("args", []))
             for c in inits.values()), "no setup container loads the ruleset")

    mounts = {m["mountPath"]: volumes[m["name"]] for m in main_c["volumeMounts"]}
    cmd = main_c["command"]
    need("-c" in cmd, "sluiced is not given -c")
    conf_path = cmd[cmd.index("-c") + 1]
    conf_vol = mounts.get(os.path.dirname(conf_path))
    need(conf_vol is not None and "configMap" in conf_vol,
         "%s is not on a ConfigMap mount" % conf_path)
    conf_cm = by_kind["ConfigMap"][conf_vol["configMap"]["name"]]
    need(os.path.basename(conf_path) in conf_cm["data"], "%s is not a key of its ConfigMap" % conf_path)
    conf = yaml.safe_load(conf_cm["data"][os.path.basename(conf_path)])

    def mount_of(path, kind=None):
        vol = mounts.get(path)
        need(vol is not None, "%s is not a mount of container sluiced" % path)
        need(kind is None or kind in vol, "%s is not a %s volume" % (path, kind))
        return vol

    pol_vol = mount_of(conf["policy_dir"], "configMap")
    need(conf.get("watch_policies") is True, "watch_policies is not true: ConfigMap updates would wait")
    mount_of(conf["secret_dir"], "secret")
    for k in ("gateway_key", "signing_key"):
        mount_of(os.path.dirname(conf[k]))
    mount_of(conf["state_dir"], "hostPath")
    mount_of(os.path.dirname(conf["audit"]["path"]), "hostPath")
    mount_of(os.path.dirname(conf["listen"]["control"]), "hostPath")
    policies = by_kind["ConfigMap"][pol_vol["configMap"]["name"]]["data"]
    need("default.yaml" in policies, "no default policy")

    # The configuration under ROOT, for sluiced --check.
    def moved(p):
        return os.path.join(root, p.lstrip("/"))
    conf["policy_dir"] = moved(conf["policy_dir"])
    conf["secret_dir"] = moved(conf["secret_dir"])
    conf["state_dir"] = moved(conf["state_dir"])
    for k in ("gateway_key", "signing_key"):
        conf[k] = moved(conf[k])
    conf["audit"]["path"] = moved(conf["audit"]["path"])
    conf["listen"]["control"] = moved(conf["listen"]["control"])
    os.makedirs(conf["policy_dir"], exist_ok=True)
    for name, text in policies.items():
        stem = name.rsplit(".", 1)[0]
        need(yaml.safe_load(text).get("name") == stem, "policy %s is not named %s" % (name, stem))
        with open(os.path.join(conf["policy_dir"], name), "w") as f:
            f.write(text)
    out = moved(conf_path)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        yaml.safe_dump(conf, f)
    print(out)


if __name__ == "__main__":
    main()
