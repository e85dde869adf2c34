//! Resource types that hold data: replacing one deletes what it holds (a table's items, a
//! bucket's objects, a database, a key that encrypted something), so a plan that replaces
//! one is refused unless the user says otherwise.

/// The types whose replacement destroys data.
pub const DATA_TYPES: &[&str] = &[
    "AWS::Backup::BackupVault",
    "AWS::Cognito::UserPool",
    "AWS::DocDB::DBCluster",
    "AWS::DynamoDB::GlobalTable",
    "AWS::DynamoDB::Table",
    "AWS::ECR::Repository",
    "AWS::EFS::FileSystem",
    "AWS::ElastiCache::CacheCluster",
    "AWS::ElastiCache::ReplicationGroup",
    "AWS::Elasticsearch::Domain",
    "AWS::FSx::FileSystem",
    "AWS::KMS::Key",
    "AWS::Kinesis::Stream",
    "AWS::Logs::LogGroup",
    "AWS::Neptune::DBCluster",
    "AWS::OpenSearchService::Domain",
    "AWS::QLDB::Ledger",
    "AWS::RDS::DBCluster",
    "AWS::RDS::DBInstance",
    "AWS::Redshift::Cluster",
    "AWS::S3::Bucket",
    "AWS::SecretsManager::Secret",
    "AWS::Timestream::Table",
];

/// True when replacing a resource of type `ty` destroys data it holds.
pub fn holds_data(ty: &str) -> bool {
    DATA_TYPES.binary_search(&ty).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_sorted_and_answers() {
        assert!(
            DATA_TYPES.windows(2).all(|w| w[0] < w[1]),
            "keep DATA_TYPES sorted"
        );
        assert!(holds_data("AWS::DynamoDB::Table"));
        assert!(holds_data("AWS::S3::Bucket"));
        assert!(!holds_data("AWS::SNS::Topic"));
        assert!(!holds_data("AWS::IAM::Role"));
    }
}
