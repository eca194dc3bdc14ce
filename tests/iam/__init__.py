"""IAM as AWS enforces it, in the moto-backed handler tests: which IAM action and resource each AWS call is
authorized as (`requests`), the component's own rendered role policies (`roles`), and the enforcement wired into
every boto3 call handler code makes (`enforce`)."""
