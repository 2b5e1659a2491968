//! harvester
