"""Upload size enforced while the body streams in, so an oversized file is never held whole."""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload


class LimitedUploadHandler(FileUploadHandler):
    """First in the handler chain: counts bytes and stops the upload past OCR_MAX_UPLOAD_BYTES.

    The view sees ``request.upload_too_large`` and answers 413 with ``input:too-large``.
    """

    def __init__(self, request=None) -> None:
        super().__init__(request)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        if self.received > settings.OCR_MAX_UPLOAD_BYTES:
            if self.request is not None:
                self.request.upload_too_large = True
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
