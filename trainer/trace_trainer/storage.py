"""Artifact URIs the trainer reads and writes: local paths, file:// URIs, and s3://bucket/key on any
S3-compatible endpoint. Directory writes are atomic for readers: local directories are renamed
into place; on S3 every object is a single PUT and `latest.json` pointers are written last."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.parse
from pathlib import Path

from .config import S3Config


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *[p.strip("/") for p in parts]])


def _local(uri: str) -> Path:
    if uri.startswith("file://"):
        return Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))
    return Path(uri)


def _s3_parts(uri: str) -> tuple[str, str]:
    p = urllib.parse.urlparse(uri)
    return p.netloc, p.path.lstrip("/")


class Store:
    def __init__(self, s3: S3Config | None = None):
        self.s3cfg = s3 or S3Config()
        self._client = None

    @property
    def s3(self):
        if self._client is None:
            import boto3
            from botocore.config import Config

            endpoint = self.s3cfg.endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            style = "path" if self.s3cfg.force_path_style else "auto"
            self._client = boto3.client("s3", endpoint_url=endpoint, region_name=self.s3cfg.region,
                                        config=Config(s3={"addressing_style": style}, retries={"max_attempts": 5}))
        return self._client

    def put_bytes(self, uri: str, data: bytes) -> None:
        if uri.startswith("s3://"):
            bucket, key = _s3_parts(uri)
            self.s3.put_object(Bucket=bucket, Key=key, Body=data)
            return
        path = _local(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def get_bytes(self, uri: str) -> bytes:
        if uri.startswith("s3://"):
            bucket, key = _s3_parts(uri)
            return self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return _local(uri).read_bytes()

    def exists(self, uri: str) -> bool:
        if uri.startswith("s3://"):
            bucket, key = _s3_parts(uri)
            try:
                self.s3.head_object(Bucket=bucket, Key=key)
                return True
            except self.s3.exceptions.ClientError:
                return False
        return _local(uri).exists()

    def put_dir(self, local_dir: str, uri: str) -> None:
        if uri.startswith("s3://"):
            for f in sorted(Path(local_dir).rglob("*")):
                if f.is_file():
                    self.put_bytes(join(uri, f.relative_to(local_dir).as_posix()), f.read_bytes())
            return
        dest = _local(uri)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
        shutil.copytree(local_dir, tmp, dirs_exist_ok=True)
        if dest.exists():  # a retried save of the same iteration replaces the earlier copy
            old = dest.with_name(f".{dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(dest, old)
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)

    def get_dir(self, uri: str, local_dir: str) -> str:
        if uri.startswith("s3://"):
            bucket, prefix = _s3_parts(uri)
            prefix = prefix.rstrip("/") + "/"
            pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            found = False
            for page in pages:
                for obj in page.get("Contents", []):
                    found = True
                    target = Path(local_dir) / obj["Key"][len(prefix):]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(self.s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
            if not found:
                raise FileNotFoundError(f"no objects under {uri}")
            return local_dir
        src = _local(uri)
        if not src.is_dir():
            raise FileNotFoundError(f"no directory {uri}")
        return str(src)

    def list(self, uri: str) -> list[str]:
        """URIs of the files directly or indirectly under `uri`, sorted."""
        if uri.startswith("s3://"):
            bucket, prefix = _s3_parts(uri)
            prefix = prefix.rstrip("/") + "/"
            out = []
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                out += [f"s3://{bucket}/{o['Key']}" for o in page.get("Contents", [])]
            return sorted(out)
        base = _local(uri)
        return sorted(join(uri, f.relative_to(base).as_posix()) for f in base.rglob("*") if f.is_file() and not f.name.startswith("."))

    def get_json(self, uri: str):
        return json.loads(self.get_bytes(uri))

    def put_json(self, uri: str, obj) -> None:
        self.put_bytes(uri, json.dumps(obj, indent=2).encode())
