# For mypy only (pyproject's mypy_path). pulumi_aws's own __init__ imports every AWS service for type checkers, about
# 3,100 modules that cost mypy some 100 s of CPU on a cold cache (most of `make typecheck` on a clean clone). This stub
# names only what this repo uses; each name still resolves to pulumi_aws's real module, so every call into it is
# checked as before. Using another service: add it here (mypy says `Module has no attribute ...` until you do).
from . import cloudwatch as cloudwatch
from . import dynamodb as dynamodb
from . import iam as iam
from . import kms as kms
from . import lambda_ as lambda_
from . import scheduler as scheduler
from . import sns as sns
from . import sqs as sqs
from .get_caller_identity import get_caller_identity as get_caller_identity
from .get_caller_identity import get_caller_identity_output as get_caller_identity_output
from .get_partition import get_partition as get_partition
from .get_region import get_region as get_region
from .get_region import get_region_output as get_region_output
from .provider import Provider as Provider
