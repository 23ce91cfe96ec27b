"""On-disk formats: framing, versioning, the array codec, limits, param dicts, atomic writes.

Lowest layer; imports numpy and msgpack only, never ``vm`` or ``compiler``.

- :mod:`serialization.errors`: :class:`FormatError` (a ``ValueError`` naming the section).
- :mod:`serialization.framing`: magic + (major, minor) + msgpack sections; deterministic.
- :mod:`serialization.codec`: msgpack with input-derived limits and rewrapped errors.
- :mod:`serialization.dtypes`: :data:`DTYPE_NAMES`, the one list of element types.
- :mod:`serialization.ndarray`: numpy arrays as one extension type, with a dtype allowlist.
- :mod:`serialization.limits`: resource caps as named constants.
- :mod:`serialization.formats`: the executable and parameter-dictionary formats.
- :mod:`serialization.atomic`: :func:`atomic_write`.
- :mod:`serialization.params`: :func:`save_param_dict` and :func:`load_param_dict`.
- :mod:`serialization.model_library`: :func:`export_model_library_format` and
  :func:`read_model_library_format` (Model Library Format tars), and
  :class:`UnsupportedInModelLibraryFormatError`.
"""

from serialization import limits
from serialization.atomic import atomic_write
from serialization.errors import FormatError, VersionError
from serialization.formats import EXECUTABLE_FORMAT, PARAMS_FORMAT
from serialization.framing import Document, DocumentFormat, read_document, write_document
from serialization.model_library import (
    MODEL_LIBRARY_VERSION,
    ModelLibrary,
    ModelLibraryParts,
    UnsupportedInModelLibraryFormatError,
    export_model_library_format,
    read_model_library_format,
)
from serialization.ndarray import ALLOWED_DTYPES, DTYPE_NAMES
from serialization.params import load_param_dict, save_param_dict

__all__ = [
    "ALLOWED_DTYPES",
    "DTYPE_NAMES",
    "EXECUTABLE_FORMAT",
    "MODEL_LIBRARY_VERSION",
    "PARAMS_FORMAT",
    "Document",
    "DocumentFormat",
    "FormatError",
    "ModelLibrary",
    "ModelLibraryParts",
    "UnsupportedInModelLibraryFormatError",
    "VersionError",
    "atomic_write",
    "export_model_library_format",
    "limits",
    "load_param_dict",
    "read_document",
    "read_model_library_format",
    "save_param_dict",
    "write_document",
]
