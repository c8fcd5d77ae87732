export const INSTALL_USAGE = `Install (Velero's install/uninstall; the deployment is k8s/ as kustomize renders it):
  install [--storage s3://BUCKET[/PREFIX]] [--s3-endpoint URL] [--s3-region REGION] [--secret-file FILE]
          [--image REPOSITORY] [--tag TAG] [--redis-url URL] [--replicas COMPONENT=N,...]
          [--kubeconfig FILE] [--context NAME] [--dry-run [-o yaml|json]]
          applies the CRDs, the stowage namespace, identities and RBAC, api, workers, node agents and
          Redis (none with --redis-url) by server-side apply; again with the same flags changes nothing.
          Without --storage backups live on the stowage-backups claim (ReadWriteMany); with s3:// in the
          bucket, its credentials from --secret-file (an AWS credentials file, profile [default]).
          The API token and the repository key are generated once and never replaced.
  uninstall [--kubeconfig FILE] [--context NAME] [--confirm]
          deletes what install made; keeps the storage (bucket or claim), the stowage namespace and the
          stowage-repo-key Secret in it, so a reinstall reads the kept backups`;
