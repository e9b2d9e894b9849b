"""Text artefacts from a plan: cloud-init user-data, systemd unit, env files and the launcher
(:mod:`cloudinit`), Kubernetes manifests (:mod:`k8s`). Templates live in ``templates/``."""
