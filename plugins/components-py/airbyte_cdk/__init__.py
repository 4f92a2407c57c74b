"""The part of airbyte_cdk that custom components (components.py) import, written for the Sluice
sandbox: same import paths and constructor fields, pure Python, no third-party packages.
See plugins/components-py/README.md for what each piece follows and what is not supported."""

from airbyte_cdk.models import FailureType
from airbyte_cdk.sources.declarative.auth.token import BearerAuthenticator
from airbyte_cdk.sources.declarative.decoders.decoder import Decoder
from airbyte_cdk.sources.declarative.extractors.dpath_extractor import DpathExtractor
from airbyte_cdk.sources.declarative.extractors.record_selector import RecordSelector
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.retrievers.simple_retriever import SimpleRetriever
from airbyte_cdk.utils.traced_exception import AirbyteTracedException

__all__ = ["AirbyteTracedException", "BearerAuthenticator", "Decoder", "DpathExtractor", "FailureType",
           "InterpolatedString", "RecordSelector", "SimpleRetriever"]
