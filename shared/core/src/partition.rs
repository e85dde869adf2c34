//! The partition a region belongs to, and the domain of its endpoints: the one rule every
//! ARN and URL stackflow builds goes by (`AWS::Partition`, `AWS::URLSuffix`, asset
//! destinations, the providers' ARNs).

/// The partition a region belongs to.
pub fn partition(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else if region.starts_with("us-isob-") {
        "aws-iso-b"
    } else if region.starts_with("us-iso-") {
        "aws-iso"
    } else if region.starts_with("eu-isoe-") {
        "aws-iso-e"
    } else if region.starts_with("us-isof-") {
        "aws-iso-f"
    } else {
        "aws"
    }
}

/// The domain suffix of a region's endpoints.
pub fn url_suffix(region: &str) -> &'static str {
    match partition(region) {
        "aws-cn" => "amazonaws.com.cn",
        "aws-iso" => "c2s.ic.gov",
        "aws-iso-b" => "sc2s.sgov.gov",
        "aws-iso-e" => "cloud.adc-e.uk",
        "aws-iso-f" => "csp.hci.ic.gov",
        _ => "amazonaws.com",
    }
}
