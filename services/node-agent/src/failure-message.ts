import { isKubeError } from '@stowage/kube';
import { isRepoError, RepoErrorCode } from '@stowage/repository';

/** A PVB failure message a person can act on, from whatever the copy threw. */
export function describeCopyFailure(error: unknown, context: { repoDir: string; volumeDir?: string | undefined }): string {
  if (isRepoError(error)) {
    switch (error.code) {
      case RepoErrorCode.WrongKey:
        return `the repository key (STOWAGE_REPO_KEY) does not match the repository at ${context.repoDir}; give the node agent the key the repository was created with`;
      case RepoErrorCode.KeyMissing:
        return 'no repository key: set STOWAGE_REPO_KEY from the repository key Secret';
      case RepoErrorCode.Unreachable:
        return `${error.message}; check that the backup storage is mounted and writable by the node agent`;
      case RepoErrorCode.NotInitialised:
      case RepoErrorCode.FormatUnsupported:
        return `the repository at ${context.repoDir} cannot be used: ${error.message}`;
      case RepoErrorCode.SourceMissing:
        return `the volume directory ${context.volumeDir ?? String(error.details.path)} does not exist on this node (was the pod's volume unmounted?)`;
      case RepoErrorCode.SourceNotDirectory:
      case RepoErrorCode.SourceUnreadable:
        return `cannot read the volume: ${error.message}`;
      case RepoErrorCode.WriteFailed:
        return `${error.message}; check free space and permissions of the backup storage`;
      default:
        return error.message;
    }
  }
  if (isKubeError(error)) return `the Kubernetes API could not be read: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
