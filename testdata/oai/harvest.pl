#!/usr/bin/perl
# Harvests an OAI-PMH repository with HTTP::OAI (Debian's libhttp-oai-perl),
# an independent client, and prints one line per record:
# identifier, datestamp, "deleted" or "-", dc:title.
# Usage: harvest.pl BASEURL [from]
use strict;
use warnings;
use HTTP::OAI;
use XML::LibXML::XPathContext;

my ($base, $from) = @ARGV;
my $h = HTTP::OAI::Harvester->new(baseURL => $base, resume => 1);
my %args = (metadataPrefix => 'oai_dc');
$args{from} = $from if defined $from;
binmode STDOUT, ':encoding(UTF-8)';
# onRecord sees every record of every page as the harvester follows the
# resumption tokens (next() only walks the last page it holds).
my $list = $h->ListRecords(%args, onRecord => sub {
	my $rec = shift;
	my $hd = $rec->header;
	my $title = '-';
	if (!$hd->is_deleted && $rec->metadata) {
		my $xc = XML::LibXML::XPathContext->new($rec->metadata->dom);
		$xc->registerNs(dc => 'http://purl.org/dc/elements/1.1/');
		my $t = $xc->findvalue('.//dc:title');
		$title = $t if $t ne '';
	}
	printf "%s\t%s\t%s\t%s\n", $hd->identifier, $hd->datestamp, ($hd->is_deleted ? 'deleted' : '-'), $title;
});
die "ListRecords: " . $list->message . "\n" if $list->is_error;
